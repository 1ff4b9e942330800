// The request path of `serve`: facts → decide() → forward, with retries on
// other replicas before the first byte (max_retries, retry budget), passive
// health reports, in-flight accounting, metrics and a log line. The snapshot
// a request starts on is the one it finishes on.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { commit, complete, type CommitHooks } from '../decide/commit.ts';
import { chosen, decide, rejectedWith, type Admitted, type Rejected } from '../decide/decide.ts';
import type { DecideEnv } from '../decide/env.ts';
import type { StrategyFault } from '../decide/replica.ts';
import { rejection, type Rejection } from '../errors.ts';
import { requestFacts, type RequestFacts } from '../facts/request-facts.ts';
import type { Endpoint } from '../facts/request-schemas.ts';
import type { OutlierScope } from '../fleet/live-fleet.ts';
import type { UpstreamOutcome } from '../fleet/outlier.ts';
import type { FleetView } from '../fleet/types.ts';
import type { DecisionLog } from '../observe/decision-log.ts';
import type { RouterMetrics } from '../observe/metrics.ts';
import { countShed } from './count-shed.ts';
import type { RequestTrace, UpstreamAttemptTrace } from '../observe/tracing.ts';
import type { Pool, ReplicaSpec, Generation } from '../decide/generation.ts';
import type { ColdLoads } from './cold-loads.ts';
import { apiKeyHashOf } from './early-admission.ts';
import { attempt, type AttemptResult, type Waiting } from './forward.ts';
import { countRejection } from './refusals.ts';
import type { RetryBudget } from './retry-budget.ts';
import type { SilenceKey, SilenceWatch } from './silence.ts';
import type { BaseLatency } from '../fleet/base-latency.ts';
import { uncachedPromptTokens, type CachedPrefixLookup } from '../fleet/uncached-prompt.ts';
import { QUOTA_WAIT_ROUNDS, quotaWait } from '../quota/wait.ts';
import { countRequestTokens } from '../tokens/request-path.ts';
import type { Upstreams } from './upstream.ts';
import { notifyDecided, notifyEnded, type RequestObserver } from './request-observer.ts';
import { UpstreamBody } from './upstream-body.ts';
import { UsageSettlement } from './settle-usage.ts';
import type { UsageTap } from './usage-tap.ts';
import { rateLimitHeaders } from './ratelimit-headers.ts';
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
  readonly metrics: RouterMetrics;
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
  /** OpenTelemetry tracing, when on (docs/observability.md): starts a request's trace; absent while tracing is off (OpenTelemetry is then never loaded). */
  readonly startTrace?: (endpoint: string, path: string, headers: FastifyRequest['headers'], attributes: Record<string, string>) => RequestTrace;
  /** A strategy misbehaved (logged at most once per interval per plugin by the caller). */
  onStrategyFault?(pool: Pool, strategy: string, fault: StrategyFault, detail: string): void;
  /** Watchers that never act: the shadow policy, the traffic recorder (request-observer.ts). */
  readonly observers?: readonly RequestObserver[];
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
  snapshot: Generation,
  endpoint: Endpoint,
  path: string,
  request: FastifyRequest,
  reply: FastifyReply,
  shape: RouteShape,
): Promise<void> {
  const { metrics } = deps;
  const res = reply.raw;
  const t0 = performance.now();
  const traced = deps.startTrace?.(endpoint, path, request.headers, { 'switchyard.request_id': request.id });
  const body = request.body as Record<string, unknown>;
  const prepared = shape.prepare?.(body, snapshot) ?? NOTHING_PREPARED;
  const facts = await countedFacts(
    requestFacts(
      { requestId: request.id, endpoint, headers: request.headers, body, apiKeyHash: apiKeyHashOf(request), conversationId: prepared.conversationId },
      { estimator: snapshot.settings.estimator, bodyValidated: true, conversationHeaders: snapshot.settings.conversationHeaders },
    ),
    request,
    snapshot,
    metrics,
    deps.urlOf,
  );
  // A shared quota store may need one bounded round trip first (docs/quotas.md);
  // decide() then checks synchronously. The wait is not decision time.
  let waitedMs = 0;
  for (let round = 0, wait = quotaWait(deps.env.quota, facts, snapshot, deps.env.now()); wait && round < QUOTA_WAIT_ROUNDS; round++) {
    const waitStart = performance.now();
    await wait;
    waitedMs += performance.now() - waitStart;
    wait = quotaWait(deps.env.quota, facts, snapshot, deps.env.now());
  }
  const first = decide(
    facts,
    snapshot,
    deps.fleet,
    deps.env,
    'code' in facts ? { requestId: request.id } : prepared.pinnedReplica ? { pinnedReplica: prepared.pinnedReplica } : undefined,
  );
  commit(first, deps.env, hooks);
  const decided = performance.now();
  metrics.decisionSeconds.observe((decided - t0 - waitedMs) / 1000);
  deps.decisions.add(first, 'code' in facts ? undefined : facts);
  const observers = deps.observers ?? [];
  const observed = observers.length > 0 && !('code' in facts) ? facts : undefined;
  if (observed) notifyDecided(observers, request.log, observed, first, snapshot);
  if (traced)
    traced.decided(
      chosen(first),
      'code' in facts ? undefined : facts.requestedModel,
      'code' in facts ? undefined : facts.conversationId,
      t0 + waitedMs,
      decided,
    );

  if (!first.ok) {
    const { action } = first.known;
    if (action) deps.coldLoads.trigger(action.model, action.url, first.rejection.retryAfterS ?? 60);
    const tenant = first.known.tenant === undefined ? undefined : snapshot.tenantsById.get(first.known.tenant);
    const quotaHeaders = tenant && first.rejection.code === 'quota_exceeded' ? rateLimitHeaders(deps.env.quota, tenant.id, tenant.quotas, deps.env.now()) : [];
    reject(deps, request, res, first, shape, quotaHeaders);
    traced?.end(first.rejection.status, 'rejected');
    if (observed)
      notifyEnded(observers, request.log, observed, first, snapshot, {
        outcome: 'rejected',
        status: first.rejection.status,
        durationMs: performance.now() - t0,
        attempts: 0,
      });
    return;
  }

  let decision: Admitted = first;
  const stream = body.stream === true;
  // Made once, for every attempt (unless the route's body names the replica, or is not JSON): the client's bytes, with the model and injected fields spliced in (upstream-body.ts).
  // Token quotas settle on the engine's usage (settle-usage.ts).
  const settlement = UsageSettlement.of(decision, endpoint, body);
  if (decision.value.shadowOverQuota) metrics.admission.shadowOverQuota.inc({ tenant: decision.value.tenant });
  if (decision.value.fallbackFrom) metrics.admission.fallbacks.inc({ from: decision.value.fallbackFrom, to: decision.value.model });
  let upstreamBody = new UpstreamBody(body, {
    upstreamModel: decision.value.upstreamModel,
    priority: decision.handles.pool.forwardPriority ? decision.value.priority : undefined,
    injectUsage: settlement?.injectUsage ?? false,
  });
  let tap: UsageTap | undefined;
  const tokenBudget = (facts as RequestFacts).maxTokens ?? snapshot.settings.defaultMaxTokens;
  const budgetKey = decision.handles.pool.key;
  deps.retryBudget.begin(budgetKey);
  let tried: Set<string> | undefined; // made on the first retry
  let retrying = false;
  let result: AttemptResult;
  let attempts = 0;
  try {
    for (;;) {
      tap = settlement?.tap();
      result = await send(
        deps,
        snapshot,
        decision,
        path,
        shape.bodyFor ? shape.bodyFor(body, decision, prepared) : upstreamBody.for(replicaOf(snapshot, decision.handles.pool, decision.value.replica).engine),
        shape,
        stream,
        tokenBudget,
        request,
        res,
        retrying,
        traced?.attempt(
          decision.value.replica,
          deps.urlOf(replicaOf(snapshot, decision.handles.pool, decision.value.replica)),
          attempts + 1,
          (facts as RequestFacts).maxTokens,
        ),
        tap,
      );
      attempts++;
      if (result.kind !== 'retryable') break;
      // Failed before the first byte: another replica, if the pool's limits allow.
      const pool = decision.handles.pool;
      const refused = attempts > pool.retries.maxRetries ? 'attempts' : deps.retryBudget.tryRetry(budgetKey, pool.retries, retrying) ? undefined : 'budget';
      if (refused) {
        metrics.retriesRefused.inc({ pool: pool.key, reason: refused });
        break;
      }
      retrying = true;
      complete(decision, false, hooks); // this attempt is over: the strategies hear so before the next one
      (tried ??= new Set()).add(decision.value.replica);
      const retry = decide(facts as RequestFacts, snapshot, deps.fleet, deps.env, {
        excludeReplicas: tried,
        quotaTaken: true,
        pinnedReplica: prepared.pinnedReplica,
      });
      commit(retry, deps.env, hooks);
      deps.decisions.add(retry, facts as RequestFacts);
      if (!retry.ok) {
        // Nowhere left to go: every other replica is out or failed this request.
        metrics.retriesRefused.inc({ pool: pool.key, reason: 'no_replica' });
        const wait = Math.max(2, engineRetryAfterS(result) ?? 0);
        const none = rejection(
          'no_healthy_replica',
          `No other replica of pool ${decision.value.pool} could take the request after ${failureText(result)}. Retry after ${wait} s.`,
          { retryAfterS: wait },
        );
        reject(deps, request, res, rejectedWith(none, retry.known, retry.trace, retry.handles), shape);
        traced?.end(none.status, 'upstream_error');
        if (observed)
          notifyEnded(observers, request.log, observed, decision, snapshot, {
            outcome: 'upstream_error',
            status: none.status,
            durationMs: performance.now() - t0,
            attempts,
          });
        return;
      }
      metrics.retries.inc({ pool: pool.key, cause: result.cause });
      // A retry that fell back to another model (its pools now full) names that model upstream.
      if (retry.value.upstreamModel !== decision.value.upstreamModel) {
        if (retry.value.fallbackFrom) metrics.admission.fallbacks.inc({ from: retry.value.fallbackFrom, to: retry.value.model });
        upstreamBody = new UpstreamBody(body, {
          upstreamModel: retry.value.upstreamModel,
          priority: retry.handles.pool.forwardPriority ? retry.value.priority : undefined,
          injectUsage: settlement?.injectUsage ?? false,
        });
      }
      decision = retry;
    }
  } finally {
    deps.retryBudget.end(budgetKey, retrying);
  }

  const outcome = outcomeOf(result);
  const settled = settlement?.settle(result, tap, deps.env, metrics.admission);
  metrics.requests.inc({ model: decision.value.model, pool: decision.handles.pool.key, outcome });
  if (result.kind === 'retryable') shape.writeError(res, failureRejection(result), request.id);
  traced?.end(result.kind === 'done' ? result.status : result.kind === 'retryable' ? failureRejection(result).status : 499, outcome);
  complete(decision, outcome === 'ok', hooks);
  if (observed) {
    const status = result.kind === 'done' ? result.status : result.kind === 'retryable' ? failureRejection(result).status : undefined;
    notifyEnded(observers, request.log, observed, decision, snapshot, {
      outcome,
      status,
      ttfbMs: 'ttfbMs' in result ? result.ttfbMs : undefined,
      durationMs: performance.now() - t0,
      attempts,
    });
  }
  const route = decision.value;
  request.log.info(
    {
      model: `${route.model}@${route.version}`,
      adapter: route.adapter,
      pool: route.pool,
      replica: route.replica,
      strategy: route.strategy,
      status: result.kind === 'done' ? result.status : result.kind === 'retryable' ? failureRejection(result).status : undefined,
      outcome,
      retried: retrying,
      attempts,
      usage: settled,
      failure: result.kind === 'retryable' || result.kind === 'broken' ? result.cause : undefined,
      ttfbMs: 'ttfbMs' in result ? Math.round(result.ttfbMs) : undefined,
      durationMs: Math.round(performance.now() - t0),
    },
    'routed',
  );
}

/** The facts in the engine's tokens where the model has a tokenizer (docs/tokens.md); the estimate otherwise, counted. */
async function countedFacts(
  facts: RequestFacts | Rejection,
  request: FastifyRequest,
  snapshot: Generation,
  metrics: RouterMetrics,
  urlOf: ProxyDeps['urlOf'],
): Promise<RequestFacts | Rejection> {
  if ('code' in facts) return facts;
  const counted = await countRequestTokens(facts, request.body as Record<string, unknown>, snapshot, snapshot.settings.tokenizeWaitMs, urlOf);
  metrics.promptTokenCounts.inc({ source: counted.facts.promptTokensSource, fallback: counted.fallback ?? 'none' });
  return counted.facts;
}

async function send(
  deps: ProxyDeps,
  snapshot: Generation,
  decision: Admitted,
  path: string,
  body: string | Buffer,
  shape: RouteShape,
  stream: boolean,
  tokenBudget: number,
  request: FastifyRequest,
  res: FastifyReply['raw'],
  retried: boolean,
  traced: UpstreamAttemptTrace | undefined,
  tap?: UsageTap,
): Promise<AttemptResult> {
  const pool = decision.handles.pool;
  const route = decision.value;
  const replica = replicaOf(snapshot, pool, route.replica);
  const releaseInFlight = deps.fleet.acquire(replica.id);
  const endPrefill = deps.fleet.startPrefill?.(replica.id, uncachedPromptTokens(decision.handles.routed, replica.id, deps.kvIndex));
  const endStream = stream ? deps.fleet.startStream?.(replica.id) : undefined;
  deps.metrics.decisions.inc({ pool: pool.key, replica: replica.id, strategy: route.strategy });
  const started = performance.now();
  const headers = [
    'x-request-id',
    request.id,
    'x-switchyard-model',
    `${route.model}@${route.version}`,
    ...rateLimitHeaders(deps.env.quota, route.tenant, decision.handles.tenant.quotas, deps.env.now()),
  ];
  // The client gets another model than it asked for: it always hears which (docs/policies.md, Fallback models).
  if (route.fallbackFrom) headers.push('x-switchyard-fallback-from', route.fallbackFrom);
  // Where it went and why are opt-in (settings or tenant decision_headers: full): replica ids and plugin reasons stay in.
  if ((snapshot.tenantsById.get(route.tenant)?.decisionHeaders ?? snapshot.settings.decisionHeaders) === 'full') {
    headers.push(
      'x-switchyard-pool',
      pool.name,
      'x-switchyard-replica',
      replica.id,
      'x-switchyard-reason',
      asciiHeader(route.reason),
      'x-switchyard-policy',
      String(snapshot.generation),
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
    traced?.end(undefined, 'connect');
    return { kind: 'retryable', cause: 'connect', detail: (error as Error).message.slice(0, 200) };
  }
  // Silence (docs/reliability.md): past a deadline from the peers' latency, or
  // a client that gave up first, counts against a replica whose peers answered meanwhile. Once per attempt.
  const silenceKey: SilenceKey = { pool: pool.key, stream, tokenBudget };
  const attemptStart = performance.now();
  const firstEvent = stream && deps.baseLatency ? firstEventOf(endPrefill, attemptStart) : undefined;
  let silenced = false;
  const timeoutMs = stream ? pool.upstream.streamHeadersTimeoutMs : pool.upstream.headersTimeoutMs;
  const firstCheck = deps.silence?.check(silenceKey, replica.id, attemptStart, 0, timeoutMs);
  const silence =
    firstCheck === undefined || typeof firstCheck !== 'number'
      ? undefined
      : {
          firstCheckMs: firstCheck,
          check: (): number | undefined => {
            const waitedMs = performance.now() - attemptStart;
            const verdict = deps.silence!.check(silenceKey, replica.id, attemptStart, waitedMs, timeoutMs);
            if (typeof verdict === 'number') return verdict;
            if (verdict === 'silent') {
              silenced = true;
              deps.fleet.recordUpstream(replica.id, 'silence', pool, `no first byte within ${Math.round(waitedMs)} ms while its peers answered`);
            }
            return undefined;
          },
        };
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
      traceHeaders: traced ? traced.headers() : clientTraceHeaders(request.headers),
      silence,
      sendTimeoutMs: deps.sendTimeoutMs,
      tap,
      onFirstByte: firstEvent ? firstEvent.seen : endPrefill,
    });
    if (traced)
      traced.end(
        result.kind === 'done' ? result.status : 'status' in result ? (result.status as number) : undefined,
        result.kind === 'done' ? undefined : result.kind === 'retryable' || result.kind === 'broken' ? result.cause : result.kind,
        route.upstreamModel,
      );
    if (result.kind === 'done' || result.kind === 'broken') {
      deps.metrics.ttfbSeconds.observe({ pool: pool.key }, result.ttfbMs / 1000);
      deps.metrics.upstreamSeconds.observe({ pool: pool.key }, (performance.now() - started) / 1000);
    }
    if (result.kind === 'done' || result.kind === 'broken') deps.silence?.answered(silenceKey, replica.id, result.ttfbMs);
    // Only a stream that succeeded teaches the base latency: an error answers without prefill.
    if (firstEvent?.afterMs !== undefined && result.kind === 'done' && result.status < 300)
      deps.baseLatency!.record(pool.key, firstEvent.afterMs, route.modelledWaitMs);
    if (result.kind === 'done') deps.fleet.recordUpstream(replica.id, 'success', pool);
    else if (result.kind === 'aborted') {
      if (result.beforeFirstByte && !silenced && deps.silence?.abandonmentCounts(silenceKey, replica.id, attemptStart, result.waitedMs ?? 0)) {
        deps.fleet.recordUpstream(
          replica.id,
          'silence',
          pool,
          `the client gave up after ${Math.round(result.waitedMs ?? 0)} ms without a first byte while its peers answered`,
        );
      }
    } else if (!silenced) {
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

function reject(
  deps: ProxyDeps,
  request: FastifyRequest,
  res: FastifyReply['raw'],
  decision: Rejected,
  shape: RouteShape,
  extraHeaders: readonly string[] = [],
): void {
  const r = decision.rejection;
  countRejection(deps.metrics, decision);
  countShed(deps.metrics, decision);
  const extra: Record<string, string> = {};
  for (let i = 0; i < extraHeaders.length; i += 2) extra[extraHeaders[i]] = extraHeaders[i + 1];
  shape.writeError(res, r, request.id, extra);
  request.log.info({ status: r.status, reject: r.code, model: decision.known.model, pool: decision.known.pool }, 'rejected');
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
function firstEventOf(endPrefill: (() => void) | undefined, startedAt: number): { seen: () => void; afterMs?: number } {
  const first: { seen: () => void; afterMs?: number } = {
    seen: () => {
      endPrefill?.();
      first.afterMs ??= performance.now() - startedAt;
    },
  };
  return first;
}
