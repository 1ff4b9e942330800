// Token quotas settled on what the engine used (docs/quotas.md): admission
// took an estimate of the most a request could use (core/quota/cost.ts); once
// the answer is over, the engine's `usage` says what it used, and the
// difference goes back into (or is taken from) the same bucket. What cannot
// be trusted leaves the estimate standing, and is counted.
import type { Admitted } from '../decide/decision.ts';
import type { DecideEnv } from '../decide/env.ts';
import type { AdmissionMetrics } from '../observe/admission-metrics.ts';
import { generates, readUsage, usageCost, type TokenCharge } from '../quota/cost.ts';
import type { AttemptResult } from './forward.ts';
import { clientAskedUsage } from './upstream-body.ts';
import { UsageTap } from './usage-tap.ts';

export type SettlementOutcome = 'settled' | 'failed' | 'broken' | 'missing' | 'invalid' | 'absurd' | 'duplicate';

/** How the router reads usage for one admitted request: whether to, and whether to ask the engine for a stream's usage. */
export class UsageSettlement {
  /** Ask the engine for the usage chunk (and remove it again): a stream whose client did not. */
  readonly injectUsage: boolean;
  private readonly strip: boolean;

  private constructor(
    private readonly decision: Admitted,
    private readonly charge: TokenCharge,
    private readonly endpoint: string,
    readonly stream: boolean,
    body: Record<string, unknown>,
  ) {
    const asked = clientAskedUsage(body);
    this.injectUsage = stream && generates(endpoint) && !asked;
    this.strip = this.injectUsage;
  }

  /** A settlement when the request's tenant has a token quota and this request took a charge; else undefined. */
  static of(decision: Admitted, endpoint: string, body: Record<string, unknown>): UsageSettlement | undefined {
    const charge = decision.handles.charge;
    if (!charge || decision.handles.tenant.quotas.tokensPerMinute === undefined) return undefined;
    return new UsageSettlement(decision, charge, endpoint, body.stream === true, body);
  }

  /** A tap for one attempt (each attempt's bytes are its own). */
  tap(): UsageTap {
    return new UsageTap(this.strip);
  }

  /** Settles on how the last attempt ended. Returns what was done, for the log line. */
  settle(result: AttemptResult, tap: UsageTap | undefined, env: DecideEnv, metrics: AdmissionMetrics): SettlementOutcome {
    const { charge, decision } = this;
    let used: number | undefined;
    let outcome: SettlementOutcome;
    if (result.kind === 'retryable' || (result.kind === 'done' && result.status >= 400)) {
      // No answer, or the engine refused it: nothing was generated.
      used = 0;
      outcome = 'failed';
    } else {
      tap?.finish();
      const usage = tap && tap.usageCount === 1 ? readUsage(tap.usage, charge, generates(this.endpoint)) : tap && tap.usageCount > 1 ? 'duplicate' : 'missing';
      if (typeof usage === 'object') {
        used = usageCost(usage, charge.weights);
        outcome = 'settled';
      } else if (result.kind !== 'done' && this.stream && tap) {
        // A stream cut short (engine broke, client left): charged what was delivered.
        used = charge.promptTokens * charge.weights.prompt + Math.min(tap.delivered, charge.completionTokens) * charge.weights.completion;
        outcome = 'broken';
      } else {
        outcome = result.kind === 'done' ? usage : 'broken';
      }
    }
    metrics.settlements.inc({ outcome });
    if (used === undefined) return outcome;
    const delta = charge.tokens - used;
    if (delta === 0) return outcome;
    env.quota.settle?.(decision.value.tenant, delta, decision.handles.tenant.quotas, env.now());
    metrics.settledTokens.inc({ direction: delta > 0 ? 'refund' : 'charge' }, Math.abs(delta));
    return outcome;
  }
}
