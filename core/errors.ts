// Every rejection a user can meet: a stable code, an HTTP status and an
// OpenAI-shaped error type. Routes, explain and the simulator all use these.

export const REJECTIONS = {
  invalid_request: { status: 400, type: 'invalid_request_error' },
  context_length_exceeded: { status: 400, type: 'invalid_request_error' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  model_not_allowed: { status: 403, type: 'permission_error' },
  adapter_not_allowed: { status: 403, type: 'permission_error' },
  // An admin request from a foreign Host or origin, or a state change without the intent header.
  permission_denied: { status: 403, type: 'permission_error' },
  model_not_found: { status: 404, type: 'not_found_error' },
  route_not_found: { status: 404, type: 'not_found_error' },
  // vLLM's answer for a previous_response_id it does not hold.
  response_not_found: { status: 404, type: 'invalid_request_error' },
  request_timeout: { status: 408, type: 'invalid_request_error' },
  payload_too_large: { status: 413, type: 'invalid_request_error' },
  unsupported_media_type: { status: 415, type: 'invalid_request_error' },
  expectation_failed: { status: 417, type: 'invalid_request_error' },
  headers_too_large: { status: 431, type: 'invalid_request_error' },
  quota_exceeded: { status: 429, type: 'rate_limit_error' },
  too_many_large_bodies: { status: 429, type: 'rate_limit_error' },
  quota_unavailable: { status: 503, type: 'service_unavailable_error' },
  model_cold: { status: 503, type: 'service_unavailable_error' },
  no_healthy_replica: { status: 503, type: 'service_unavailable_error' },
  no_capacity: { status: 503, type: 'service_unavailable_error' },
  shed_for_priority: { status: 503, type: 'service_unavailable_error' },
  deadline_unmeetable: { status: 503, type: 'service_unavailable_error' },
  upstream_error: { status: 502, type: 'server_error' },
  upstream_timeout: { status: 504, type: 'server_error' },
  internal_error: { status: 500, type: 'server_error' },
} as const;

export type RejectionCode = keyof typeof REJECTIONS;

export interface Rejection {
  readonly code: RejectionCode;
  readonly status: number;
  readonly type: string;
  readonly message: string;
  /** Seconds; set on 429 and 503. */
  readonly retryAfterS?: number;
  /** The OpenAI `param` the error is about, when there is one. */
  readonly param?: string;
}

/** Whether a value that is either a rejection or a record of another kind (a request's facts) is the rejection. */
export function isRejection(value: object): value is Rejection {
  return 'code' in value && 'status' in value && 'message' in value;
}

export function rejection(code: RejectionCode, message: string, extra: { retryAfterS?: number; param?: string } = {}): Rejection {
  const { status, type } = REJECTIONS[code];
  return { code, status, type, message, ...extra };
}

/** The body OpenAI clients expect: {"error":{"message","type","param","code"}}. */
export function errorBody(r: Pick<Rejection, 'message' | 'type' | 'code' | 'param'>): {
  error: { message: string; type: string; param: string | null; code: string };
} {
  return { error: { message: r.message, type: r.type, param: r.param ?? null, code: r.code } };
}
