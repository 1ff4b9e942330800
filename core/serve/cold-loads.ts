// A decision for a cold-tier model asks for it to be loaded: the router calls
// the model's load hook once while a load is pending, not once per request.
import { request } from 'undici';

export interface ColdLoadLog {
  warn(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
}

export class ColdLoads {
  /** Model → until when its load counts as pending (ms). */
  private readonly pending = new Map<string, number>();

  constructor(
    private readonly log: ColdLoadLog,
    private readonly now: () => number = Date.now,
  ) {}

  /** Calls the hook unless a load of `model` is already pending; true when it called. */
  trigger(model: string, url: string, retryAfterS: number): boolean {
    const now = this.now();
    const until = this.pending.get(model);
    if (until !== undefined && until > now) return false;
    // Pending for as long as clients are told to wait: then a request may ask again.
    this.pending.set(model, now + retryAfterS * 1000);
    request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, requested_at: new Date(now).toISOString() }),
      headersTimeout: 5000,
      bodyTimeout: 5000,
    })
      .then(async (response) => {
        await response.body.dump();
        if (response.statusCode >= 400) this.log.warn({ model, url, status: response.statusCode }, 'cold model load hook refused');
        else this.log.info({ model, url, status: response.statusCode }, 'cold model load requested');
      })
      .catch((error: Error) => this.log.warn({ model, url, err: error.message }, 'cold model load hook unreachable'));
    return true;
  }

  pendingLoads(): { model: string; untilMs: number }[] {
    const now = this.now();
    return [...this.pending].filter(([, until]) => until > now).map(([model, untilMs]) => ({ model, untilMs }));
  }
}
