// Errors in vLLM's shape: {"error":{"message","type","param","code"}}, where
// code is the HTTP status. One class, so a handler throws and the server's
// error handler answers.

export type ErrorType = 'BadRequestError' | 'NotFoundError' | 'InternalServerError' | 'ServiceUnavailableError';

const STATUS: Record<ErrorType, number> = {
  BadRequestError: 400,
  NotFoundError: 404,
  InternalServerError: 500,
  ServiceUnavailableError: 503,
};

export class EmulatorError extends Error {
  readonly type: ErrorType;
  readonly status: number;
  readonly param: string | null;

  constructor(type: ErrorType, message: string, param: string | null = null) {
    super(message);
    this.name = 'EmulatorError';
    this.type = type;
    this.status = STATUS[type];
    this.param = param;
  }

  toBody(): ErrorBody {
    return errorBody(this.type, this.message, this.status, this.param);
  }
}

export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: number };
}

export function errorBody(type: string, message: string, status: number, param: string | null = null): ErrorBody {
  return { error: { message, type, param, code: status } };
}

export const badRequest = (message: string, param: string | null = null): EmulatorError => new EmulatorError('BadRequestError', message, param);

export const modelNotFound = (model: string): EmulatorError => new EmulatorError('NotFoundError', `The model \`${model}\` does not exist.`, 'model');
