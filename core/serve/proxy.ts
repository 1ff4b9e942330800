// The request path of `serve`: facts → decide() → forward, with retries on
// other replicas before the first byte (max_retries, retry budget), passive
// health reports and in-flight accounting. What is watched of it (metrics,
// the log line, tracing, the decision log, the shadow policy, the recorder)
// subscribes to its lifecycle (request-lifecycle.ts). The generation a
// request starts on is the one it finishes on.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { commit, complete, type CommitHooks } from '../decide/commit.ts';
import { decide, rejectedWith, type Admitted, type Rejected } from '../decide/decide.ts';
import type { DecideEnv } from '../decide/env.ts';
import type { StrategyFault } from '../decide/replica.ts';
import { isRejection, rejection, type Rejection } from '../errors.ts';
import { requestFacts, type RequestFacts } from '../facts/request-facts.ts';
import type { Endpoint } from '../facts/request-schemas.ts';
import type { OutlierScope } from '../fleet/live-fleet.ts';
import type { UpstreamOutcome } from '../fleet/outlier.ts';
import type { FleetView } from '../fleet/types.ts';
import type { DecisionLog } from '../observe/decision-log.ts';
import type { RouterMetrics } from '../observe/metrics.ts';
import type { Pool, ReplicaSpec, Generation } from '../decide/generation.ts';
import type { ColdLoads } from './cold-loads.ts';
import { apiKeyHashOf } from './early-admission.ts';
import { attempt, type AttemptResult, type Waiting } from './forward.ts';
import type { RetryBudget } from './retry-budget.ts';
import type { SilenceKey, SilenceWatch } from './silence.ts';
import type { BaseLatency } from '../fleet/base-latency.ts';
import { uncachedPromptTokens, type CachedPrefixLookup } from '../fleet/uncached-prompt.ts';
import { QUOTA_WAIT_ROUNDS, quotaWait } from '../quota/wait.ts';
import { countRequestTokens } from '../tokens/request-path.ts';
import type { Upstreams } from './upstream.ts';
import type { AttemptStarted, RequestLifecycle } from './request-lifecycle.ts';
import { UpstreamBody } from './upstream-body.ts';
import { UsageSettlement } from './settle-usage.ts';
import type { UsageTap } from './usage-tap.ts';
import { rateLimitHeaders, sendsRateLimits } from './ratelimit-headers.ts';
import { clientTraceHeaders, NOTHING_PREPARED, OPENAI_ROUTE, type RouteShape } from './route-shapes.ts';

/** Where requests get their snapshot: acquired at arrival, released when the response ends. */
export interface GenerationSource {
  current(): Generation;
  acquire(): { readonly snapshot: Generation; release(): void };
}

/** The fleet as the proxy uses it: signals, plus its own in-flight counts and how its attempts ended. */
export interface RouterFleet extends FleetView {
  acquire(id: string): () => void;
  /** Load in tokens: prompt tokens before their first byte, and open streams (each counted until the returned function runs). */
  startPrefill?(id: string, tokens: number): () => void;
  startStream?(id: string): () => void;
  /** A connect error: counts as a failed health check at once. */
  markFailure(id: string, error?: string): void;
  /** Passive health: every attempt's outcome (outlier detection). */
  recordUpstream(id: string, outcome: UpstreamOutcome, scope: OutlierScope, detail?: string): void;
}

export interface ProxyDeps {
  readonly policy: GenerationSource;
  readonly fleet: RouterFleet;
  readonly upstreams: Upstreams;
  readonly retryBudget: RetryBudget;
  readonly waiting: Waiting;
  readonly env: DecideEnv;
  /** Counts what only the request path knows (prompt token counts, retries); the rest is the lifecycle's subscribers'. */
  readonly metrics: RouterMetrics;
  readonly lifecycle: RequestLifecycle;
  /** Where requests refused before their route ran are kept (refusals.ts); decided ones reach it through the lifecycle. */
  readonly decisions: DecisionLog;
  readonly coldLoads: ColdLoads;
  /** Peers' recent first-byte latency: a replica silent while they answer is failing (docs/reliability.md). */
  readonly silence?: SilenceWatch;
  /** Streams' first tokens against the wait estimate: the pools' base latency for the deadline check. */
  readonly baseLatency?: BaseLatency;
  /** What each replica caches of a prompt: the token load counts the rest. */
  readonly kvIndex?: CachedPrefixLookup;
  /** A client that reads nothing for this long loses its response (settings send_timeout_ms). */
  readonly sendTimeoutMs?: number;
  /** The URL to reach a replica at (emulate:// replicas run on loopback ports). */
  urlOf(replica: ReplicaSpec): string;
  /** A strategy misbehaved (logged at most once per interval per plugin by the caller). */
  onStrategyFault?(pool: Pool, strategy: string, fault: StrategyFault, detail: string): void;
}

// Header values must be printable ASCII; reasons are for humans and may not be.
const asciiHeader = (text: string) => text.replace(/[^\x20-\x7e]/g, '?').slice(0, 200);

export function proxyHandler(deps: ProxyDeps, endpoint: Endpoint, path: string, shape: RouteShape = OPENAI_ROUTE) {
  const hooks: CommitHooks = { onFault: deps.onStrategyFault };
  return async function handle(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    reply.hijack(); // we write the raw response ourselves, as bytes arrive
    const lease = deps.policy.acquire();
    try {
      await route(deps, hooks, lease.snapshot, endpoint, path, request, reply, shape);
    } catch (error) {
      request.log.error({ err: error }, 'proxy failure');
      shape.writeError(reply.raw, rejection('internal_error', 'The router failed to handle this request.'), request.id);
    } finally {
      lease.release();
    }
  };
}

async function route(
  deps: ProxyDeps,
  hooks: CommitHooks,
  generation: Generation,
  endpoint: Endpoint,
  path: string,
  request: FastifyRequest,
  reply: FastifyReply,
  shape: RouteShape,
): Promise<void> {
  const { lifecycle } = deps;
  const res = reply.raw;
  const startedAt = performance.now();
  const body = request.body as Record<string, unknown>;
  const prepared = shape.prepare?.(body, generation) ?? NOTHING_PREPARED;
  const counting = countedFacts(
    requestFacts(
      { requestId: request.id, endpoint, headers: request.headers, body, apiKeyHash: apiKeyHashOf(request), conversationId: prepared.conversationId },
      { estimator: generation.settings.estimator, bodyValidated: true, conversationHeaders: generation.settings.conversationHeaders },
    ),
    request,
    generation,
    deps.metrics,
    deps.urlOf,
  );
  // Awaited only when a tokenizer is counting: an await is a turn of the microtask queue, and most requests have nothing to wait for.
  const checked = counting instanceof Promise ? await counting : counting;
  // A shared quota store may need one bounded round trip first (docs/quotas.md);
  // decide() then checks synchronously. The wait is not decision time.
  let waitedMs = 0;
  for (let round = 0, wait = quotaWait(deps.env.quota, checked, generation, deps.env.now()); wait && round < QUOTA_WAIT_ROUNDS; round++) {
    const waitStart = performance.now();
    await wait;
    waitedMs += performance.now() - waitStart;
    wait = quotaWait(deps.env.quota, checked, generation, deps.env.now());
  }
  const facts = isRejection(checked) ? undefined : checked;
  const first = decide(
    checked,
    generation,
    deps.fleet,
    deps.env,
    facts ? (prepared.pinnedReplica ? { pinnedReplica: prepared.pinnedReplica } : undefined) : { requestId: request.id },
  );
  commit(first, deps.env, hooks);
  const decidedAt = performance.now();
  lifecycle.decided({
    request,
    endpoint,
    path,
    facts,
    decision: first,
    generation,
    retry: false,
    startedAt,
    decidedAt,
    decisionMs: decidedAt - startedAt - waitedMs,
  });

  if (!first.ok) {
    const { action, tenant: tenantId } = first.known;
    if (action) deps.coldLoads.trigger(action.model, action.url, first.rejection.retryAfterS ?? 60);
    const tenant = tenantId === undefined ? undefined : generation.tenantsById.get(tenantId);
    const quotaHeaders =
      tenant && first.rejection.code === 'quota_exceeded' ? rateLimitHeaders(deps.env.quota, tenant.id, tenant.quotas, deps.env.now()) : NO_HEADERS;
    shape.writeError(res, first.rejection, request.id, headerRecord(quotaHeaders));
    lifecycle.finished({
      request,
      endpoint,
      facts,
      generation,
      durationMs: performance.now() - startedAt,
      decision: first,
      refusal: first,
      outcome: 'rejected',
      status: first.rejection.status,
      attempts: 0,
      retried: false,
    });
    return;
  }
  // Only a request whose facts were read is admitted.
  const admittedFacts = facts as RequestFacts;
  let decision: Admitted = first;
  const stream = body.stream === true;
  // Made once, for every attempt (unless the route's body names the replica, or is not JSON): the client's bytes, with the model and injected fields spliced in (upstream-body.ts).
  // Token quotas settle on the engine's usage (settle-usage.ts).
  const settlement = UsageSettlement.of(decision, endpoint, body);
  let upstreamBody = upstreamBodyFor(body, decision, settlement);
  let tap: UsageTap | undefined;
  const tokenBudget = admittedFacts.maxTokens ?? generation.settings.defaultMaxTokens;
  const budgetKey = decision.handles.pool.key;
  deps.retryBudget.begin(budgetKey);
  let tried: Set<string> | undefined; // made on the first retry
  let retrying = false;
  let result: AttemptResult;
  let attempts = 0;
  /** Set when a failed attempt finds no other replica to retry on: what the client is told instead of the engine's failure. */
  let noReplica: Rejected | undefined;
  try {
    for (;;) {
      tap = settlement?.tap();
      const replica = replicaOf(generation, decision.handles.pool, decision.value.replica);
      const upstream = shape.bodyFor ? shape.bodyFor(body, decision, prepared) : upstreamBody.for(replica.engine);
      const attempt = {
        request,
        endpoint,
        decision,
        attempt: ++attempts,
        replicaUrl: deps.urlOf(replica),
        maxTokens: admittedFacts.maxTokens,
      } as AttemptStarted;
      lifecycle.attemptStarted(attempt);
      const sent = performance.now();
      result = await send(deps, generation, {
        decision,
        replica,
        path,
        body: upstream,
        shape,
        stream,
        tokenBudget,
        request,
        res,
        retried: retrying,
        traceHeaders: attempt.traceHeaders,
        tap,
      });
      lifecycle.attemptEnded({ request, decision, attempt: attempts, result, durationMs: performance.now() - sent });
      if (result.kind !== 'retryable') break;
      // Failed before the first byte: another replica, if the pool's limits allow.
      const pool = decision.handles.pool;
      const refused = attempts > pool.retries.maxRetries ? 'attempts' : deps.retryBudget.tryRetry(budgetKey, pool.retries, retrying) ? undefined : 'budget';
      if (refused) {
        deps.metrics.retriesRefused.inc({ pool: pool.key, reason: refused });
        break;
      }
      retrying = true;
      complete(decision, false, hooks); // this attempt is over: the strategies hear so before the next one
      (tried ??= new Set()).add(decision.value.replica);
      const retryStart = performance.now();
      const retry = decide(admittedFacts, generation, deps.fleet, deps.env, {
        excludeReplicas: tried,
        quotaTaken: true,
        pinnedReplica: prepared.pinnedReplica,
      });
      commit(retry, deps.env, hooks);
      const retryDecided = performance.now();
      lifecycle.decided({
        request,
        endpoint,
        path,
        facts,
        decision: retry,
        generation,
        retry: true,
        previous: decision,
        startedAt,
        decidedAt: retryDecided,
        decisionMs: retryDecided - retryStart,
      });
      if (!retry.ok) {
        // Nowhere left to go: every other replica is out or failed this request.
        deps.metrics.retriesRefused.inc({ pool: pool.key, reason: 'no_replica' });
        const wait = Math.max(2, engineRetryAfterS(result) ?? 0);
        const none = rejection(
          'no_healthy_replica',
          `No other replica of pool ${decision.value.pool} could take the request after ${failureText(result)}. Retry after ${wait} s.`,
          { retryAfterS: wait },
        );
        noReplica = rejectedWith(none, retry.known, retry.trace, retry.handles);
        break;
      }
      deps.metrics.retries.inc({ pool: pool.key, cause: result.cause });
      // A retry that fell back to another model (its pools now full) names that model upstream.
      if (retry.value.upstreamModel !== decision.value.upstreamModel) upstreamBody = upstreamBodyFor(body, retry, settlement);
      decision = retry;
    }
  } finally {
    deps.retryBudget.end(budgetKey, retrying);
  }

  const outcome = outcomeOf(result);
  // Every way out settles: a request that got no answer gives its whole charge back.
  const usage = settlement?.settle(result, tap, deps.env, deps.metrics.admission);
  let status: number | undefined;
  if (result.kind === 'retryable') {
    const failure = noReplica?.rejection ?? failureRejection(result);
    shape.writeError(res, failure, request.id);
    status = failure.status;
  } else if (result.kind === 'done') status = result.status;
  // A decision that found no replica to retry on was completed (failed) before that retry.
  if (!noReplica) complete(decision, outcome === 'ok', hooks);
  lifecycle.finished({
    request,
    endpoint,
    facts,
    generation,
    durationMs: performance.now() - startedAt,
    decision,
    refusal: noReplica,
    outcome,
    status,
    attempts,
    retried: retrying,
    ttfbMs: 'ttfbMs' in result ? result.ttfbMs : undefined,
    usage,
    failure: result.kind === 'retryable' || result.kind === 'broken' ? result.cause : undefined,
  });
}

const NO_HEADERS: readonly string[] = Object.freeze([]);

function headerRecord(pairs: readonly string[]): Record<string, string> | undefined {
  if (pairs.length === 0) return undefined;
  const record: Record<string, string> = {};
  for (let i = 0; i < pairs.length; i += 2) record[pairs[i]] = pairs[i + 1];
  return record;
}

/** The upstream body of `decision`: its model (and priority, and usage reporting) spliced into the client's bytes. */
function upstreamBodyFor(body: Record<string, unknown>, decision: Admitted, settlement: UsageSettlement | undefined): UpstreamBody {
  return new UpstreamBody(body, {
    upstreamModel: decision.value.upstreamModel,
    priority: decision.handles.pool.forwardPriority ? decision.value.priority : undefined,
    injectUsage: settlement?.injectUsage ?? false,
  });
}

/** The facts in the engine's tokens where the model has a tokenizer (docs/tokens.md); the estimate otherwise, counted. A promise only while a tokenizer counts. */
function countedFacts(
  facts: RequestFacts | Rejection,
  request: FastifyRequest,
  snapshot: Generation,
  metrics: RouterMetrics,
  urlOf: ProxyDeps['urlOf'],
): Promise<RequestFacts | Rejection> | RequestFacts | Rejection {
  if ('code' in facts) return facts;
  const counting = countRequestTokens(facts, request.body as Record<string, unknown>, snapshot, undefined, urlOf);
  if (counting instanceof Promise) return counting.then((counted) => countOf(counted, metrics));
  return countOf(counting, metrics);
}

function countOf(counted: Awaited<ReturnType<typeof countRequestTokens>>, metrics: RouterMetrics): RequestFacts {
  metrics.promptTokenCounts.add(1, counted.facts.promptTokensSource, counted.fallback ?? 'none');
  return counted.facts;
}

/** One attempt's inputs. */
interface SendInput {
  readonly decision: Admitted;
  readonly replica: ReplicaSpec;
  readonly path: string;
  readonly body: string | Buffer;
  readonly shape: RouteShape;
  readonly stream: boolean;
  readonly tokenBudget: number;
  readonly request: FastifyRequest;
  readonly res: FastifyReply['raw'];
  readonly retried: boolean;
  /** A tracing subscriber's context for the engine; the client's own goes on without one. */
  readonly traceHeaders?: Record<string, string>;
  readonly tap?: UsageTap;
}

async function send(deps: ProxyDeps, generation: Generation, input: SendInput): Promise<AttemptResult> {
  const { decision, replica, path, body, shape, stream, tokenBudget, request, res, retried, tap } = input;
  const pool = decision.handles.pool;
  const route = decision.value;
  const releaseInFlight = deps.fleet.acquire(replica.id);
  const endPrefill = deps.fleet.startPrefill?.(replica.id, uncachedPromptTokens(decision.handles.routed, replica.id, deps.kvIndex));
  const endStream = stream ? deps.fleet.startStream?.(replica.id) : undefined;
  const headers = ['x-request-id', request.id, 'x-switchyard-model', `${route.model}@${route.version}`];
  const quotas = decision.handles.tenant.quotas;
  if (sendsRateLimits(quotas)) for (const header of rateLimitHeaders(deps.env.quota, route.tenant, quotas, deps.env.now())) headers.push(header);
  // The client gets another model than it asked for: it always hears which (docs/policies.md, Fallback models).
  if (route.fallbackFrom) headers.push('x-switchyard-fallback-from', route.fallbackFrom);
  // Where it went and why are opt-in (settings or tenant decision_headers: full): replica ids and plugin reasons stay in.
  if ((decision.handles.tenant.decisionHeaders ?? generation.settings.decisionHeaders) === 'full') {
    headers.push(
      'x-switchyard-pool',
      pool.name,
      'x-switchyard-replica',
      replica.id,
      'x-switchyard-reason',
      asciiHeader(route.reason),
      'x-switchyard-policy',
      String(generation.generation),
    );
    if (route.adapter) headers.push('x-switchyard-adapter', route.adapter);
    // Which cascade rule chose the model and which pool rule the pool (rule names come from the policy).
    if (decision.trace.model) headers.push('x-switchyard-model-rule', asciiHeader(decision.trace.model.decidedBy));
    if (decision.trace.pool) headers.push('x-switchyard-pool-rule', asciiHeader(decision.trace.pool.decidedBy));
    if (retried) headers.push('x-switchyard-retried', 'true');
  }
  let dispatcher;
  try {
    dispatcher = deps.upstreams.poolFor(deps.urlOf(replica), pool.upstream);
  } catch (error) {
    // A replica a reload just added may not be reachable yet (an emulated one still starting).
    releaseInFlight();
    endPrefill?.();
    endStream?.();
    return { kind: 'retryable', cause: 'connect', detail: (error as Error).message.slice(0, 200) };
  }
  // Silence (docs/reliability.md): past a deadline from the peers' latency, or
  // a client that gave up first, counts against a replica whose peers answered meanwhile. Once per attempt.
  const silenceKey: SilenceKey = { pool: pool.key, stream, tokenBudget };
  const attemptStart = performance.now();
  const firstEvent = stream && deps.baseLatency ? new FirstEvent(endPrefill, attemptStart) : undefined;
  const timeoutMs = stream ? pool.upstream.streamHeadersTimeoutMs : pool.upstream.headersTimeoutMs;
  const firstCheck = deps.silence?.check(silenceKey, replica.id, attemptStart, 0, timeoutMs);
  const silence =
    firstCheck === undefined || typeof firstCheck !== 'number'
      ? undefined
      : new SilenceCheck(deps.silence!, deps.fleet, silenceKey, replica.id, pool, attemptStart, timeoutMs, firstCheck);
  try {
    const result = await attempt({
      dispatcher,
      replica: replica.id,
      waiting: deps.waiting,
      path,
      body,
      contentType: shape.contentTypeOf?.(request.body as Record<string, unknown>),
      engineKey: replica.apiKey,
      errorEvent: shape.errorEvent,
      requestId: request.id,
      stream,
      timeouts: pool.upstream,
      res,
      responseHeaders: headers,
      // The client's own trace context goes on when the router does not trace (W3C Trace Context).
      traceHeaders: input.traceHeaders ?? clientTraceHeaders(request.headers),
      silence,
      startedAt: attemptStart,
      sendTimeoutMs: deps.sendTimeoutMs,
      tap,
      onFirstByte: firstEvent ? firstEvent.onSeen : endPrefill,
    });
    if (result.kind === 'done' || result.kind === 'broken') deps.silence?.answered(silenceKey, replica.id, result.ttfbMs);
    // Only a stream that succeeded teaches the base latency: an error answers without prefill.
    if (firstEvent?.afterMs !== undefined && result.kind === 'done' && result.status < 300)
      deps.baseLatency!.record(pool.key, firstEvent.afterMs, route.modelledWaitMs);
    if (result.kind === 'done') deps.fleet.recordUpstream(replica.id, 'success', pool);
    else if (result.kind === 'aborted') {
      if (result.beforeFirstByte && !silence?.silenced && deps.silence?.abandonmentCounts(silenceKey, replica.id, attemptStart, result.waitedMs ?? 0)) {
        deps.fleet.recordUpstream(
          replica.id,
          'silence',
          pool,
          `the client gave up after ${Math.round(result.waitedMs ?? 0)} ms without a first byte while its peers answered`,
        );
      }
    } else if (!silence?.silenced) {
      if (result.cause === 'connect') deps.fleet.markFailure(replica.id, result.detail);
      deps.fleet.recordUpstream(replica.id, result.cause, pool, result.detail);
    }
    return result;
  } finally {
    releaseInFlight();
    endPrefill?.();
    endStream?.();
  }
}

/** The chosen replica's spec: ids are unique across a policy, so the snapshot's index finds it (not a walk of the pool). */
function replicaOf(snapshot: Generation, pool: Pool, id: string): ReplicaSpec {
  const replica = snapshot.replicas.get(id);
  if (replica === undefined) throw new Error(`replica ${id} is not in pool ${pool.name}`);
  return replica;
}

function outcomeOf(result: AttemptResult): string {
  switch (result.kind) {
    case 'done':
      return result.status < 400 ? 'ok' : 'engine_error';
    case 'aborted':
      return 'aborted';
    case 'broken':
      return 'broken_stream';
    default:
      return 'upstream_error'; // the log line's `failure` says which kind
  }
}

/** What a client is told when no attempt got an answer (without the engine's own words: they may name hosts). */
function failureRejection(result: Extract<AttemptResult, { kind: 'retryable' }>): Rejection {
  const text = failureText(result);
  const engineWait = engineRetryAfterS(result);
  if (engineWait !== undefined)
    return {
      ...rejection('upstream_error', `The model server is unavailable (${text}). Retry after ${engineWait} s.`, { retryAfterS: engineWait }),
      status: 503,
      type: 'service_unavailable_error',
    };
  return result.cause === 'timeout'
    ? rejection('upstream_timeout', `The model server did not answer in time (${text}).`)
    : rejection('upstream_error', `The model server failed before answering (${text}).`);
}

/** The Retry-After (whole seconds, up to a day) of an engine's 503, when it sent one. */
function engineRetryAfterS(result: Extract<AttemptResult, { kind: 'retryable' }>): number | undefined {
  if (result.status !== 503 || result.retryAfter === undefined || !/^\d{1,5}$/.test(result.retryAfter.trim())) return undefined;
  const seconds = Number(result.retryAfter.trim());
  return seconds <= 86_400 ? seconds : undefined;
}

function failureText(result: Extract<AttemptResult, { kind: 'retryable' }>): string {
  switch (result.cause) {
    case 'status_5xx':
      return `it answered ${result.status}`;
    case 'connect':
      return 'no connection';
    case 'timeout':
      return 'a timeout';
    default:
      return 'a broken connection';
  }
}

/** A stream's first event is its first token: the prefill is over, and when it came is kept for the pool's base latency. */
class FirstEvent {
  afterMs: number | undefined;
  /** Bound once, for forward.ts to call (a class, not a closure per stream). */
  readonly onSeen = this.seen.bind(this);

  constructor(
    private readonly endPrefill: (() => void) | undefined,
    private readonly startedAt: number,
  ) {}

  private seen(): void {
    this.endPrefill?.();
    this.afterMs ??= performance.now() - this.startedAt;
  }
}

/**
 * An attempt's silence checks (forward.ts runs `check` on its timer until it
 * returns undefined): past the deadline from the peers' latency, the replica
 * is reported silent, once. A class: most attempts never run a check, and a
 * closure per attempt is paid whether it runs or not.
 */
class SilenceCheck {
  silenced = false;

  constructor(
    private readonly watch: SilenceWatch,
    private readonly fleet: RouterFleet,
    private readonly key: SilenceKey,
    private readonly replica: string,
    private readonly pool: Pool,
    private readonly startedAt: number,
    private readonly timeoutMs: number,
    readonly firstCheckMs: number,
  ) {}

  check(): number | undefined {
    const waitedMs = performance.now() - this.startedAt;
    const verdict = this.watch.check(this.key, this.replica, this.startedAt, waitedMs, this.timeoutMs);
    if (typeof verdict === 'number') return verdict;
    if (verdict === 'silent') {
      this.silenced = true;
      this.fleet.recordUpstream(this.replica, 'silence', this.pool, `no first byte within ${Math.round(waitedMs)} ms while its peers answered`);
    }
    return undefined;
  }
}
