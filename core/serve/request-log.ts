// Each request's logger (request.log), made only when something logs through
// it. fastify makes a pino child per request (its bindings serialized, a new
// logger object: ~6 µs and ~350 B a request at 150 B prompts), but a routed
// request logs once, its `routed` line, which the log line subscriber writes
// through the root logger with the same `reqId` field in the same place
// (request-subscribers.ts). Refusals, errors and warnings still go through
// request.log: the child is made then, and the line is pino's as before.
import type { FastifyBaseLogger } from 'fastify';
import type { Logger } from 'pino';

/** The field fastify names the request id with in each request's logger (its requestIdLogLabel default). */
export const REQUEST_ID_FIELD = 'reqId';

type Bindings = Record<string, unknown>;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
type ChildOptions = Parameters<FastifyBaseLogger['child']>[1];

/** fastify's childLoggerFactory: a logger that becomes the pino child on first use. */
export function lazyRequestLogger(this: unknown, logger: FastifyBaseLogger, bindings: Bindings, options: ChildOptions): FastifyBaseLogger {
  return new LazyChild(logger, bindings, options) as unknown as FastifyBaseLogger;
}

class LazyChild {
  #child: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly childBindings: Bindings,
    private readonly options: ChildOptions,
  ) {}

  #real(): FastifyBaseLogger {
    // An empty options object: pino treats a given level as a change and rebuilds the child's methods.
    return (this.#child ??= this.parent.child(this.childBindings, this.options && Object.keys(this.options).length ? this.options : undefined));
  }

  get level(): string {
    return this.#child?.level ?? this.parent.level;
  }
  set level(level: string) {
    this.#real().level = level;
  }
  isLevelEnabled(level: string): boolean {
    return ((this.#child ?? this.parent) as unknown as Logger).isLevelEnabled(level);
  }
  bindings(): Bindings {
    return (this.#real() as unknown as Logger).bindings();
  }
  child(bindings: Bindings, options?: ChildOptions): FastifyBaseLogger {
    return this.#real().child(bindings, options);
  }
  // fatal … trace: each makes the child (once) and logs through it.
  static {
    for (const level of LOG_LEVELS)
      Object.defineProperty(LazyChild.prototype, level, {
        value(this: LazyChild, ...args: unknown[]): void {
          (this.#real()[level] as (...a: unknown[]) => void)(...args);
        },
      });
  }
  silent(): void {}
}
