// The request path of `serve`: facts → decide() → forward, with one retry
// before the first byte, in-flight accounting, metrics and a log line. The
// snapshot a request starts on is the one it finishes on.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { decide, type DecideOptions, type Decision } from '../decide/decide.ts';
import type { DecideEnv } from '../decide/env.ts';
import type { StrategyFault } from '../decide/replica.ts';
import { rejection } from '../errors.ts';
import { oncePer } from '../once-per.ts';
import { requestFacts, type FactsOptions, type RequestFacts } from '../facts/request-facts.ts';
import type { Endpoint } from '../facts/request-schemas.ts';
import { charsPerTokenEstimator } from '../facts/tokens.ts';
import type { FleetView } from '../fleet/types.ts';
import type { DecisionLog } from '../observe/decision-log.ts';
import type { RouterMetrics } from '../observe/metrics.ts';
import type { Pool, ReplicaSpec, Snapshot } from '../policy/snapshot.ts';
import type { ColdLoads } from './cold-loads.ts';
import { attempt, type AttemptResult } from './forward.ts';
import { writeRejection } from './rejections.ts';
import { QUOTA_WAIT_ROUNDS, quotaWait } from '../quota/wait.ts';
import type { Upstreams } from './upstream.ts';

/** Where requests get their snapshot: acquired at arrival, released when the response ends. */
export interface PolicySource {
  current(): Snapshot;
  acquire(): { readonly snapshot: Snapshot; release(): void };
}

/** The fleet as the proxy uses it: signals, plus its own in-flight counts and failure reports. */
export interface RouterFleet extends FleetView {
  acquire(id: string): () => void;
  markFailure(id: string, error?: string): void;
}

export interface ProxyDeps {
  readonly policy: PolicySource;
  readonly fleet: RouterFleet;
  readonly upstreams: Upstreams;
  readonly env: DecideEnv;
  readonly metrics: RouterMetrics;
  readonly decisions: DecisionLog;
  readonly coldLoads: ColdLoads;
  /** The URL to reach a replica at (emulate:// replicas run on loopback ports). */
  urlOf(replica: ReplicaSpec): string;
  /** A strategy misbehaved (logged at most once per interval per plugin by the caller). */
  onStrategyFault?(pool: Pool, strategy: string, fault: StrategyFault, detail: string): void;
}

// The facts options of a snapshot (its token estimator), made once per snapshot.
const factsOptionsOf = oncePer((snapshot: Snapshot): FactsOptions => ({ estimator: charsPerTokenEstimator(snapshot.settings.charsPerToken), bodyValidated: true }));

// Header values must be printable ASCII; reasons are for humans and may not be.
const asciiHeader = (text: string) => text.replace(/[^\x20-\x7e]/g, '?').slice(0, 200);

export function proxyHandler(deps: ProxyDeps, endpoint: Endpoint, path: string) {
  const hooks: DecideOptions = { onFault: deps.onStrategyFault };
  return async function handle(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    reply.hijack(); // we write the raw response ourselves, as bytes arrive
    const lease = deps.policy.acquire();
    try {
      await route(deps, hooks, lease.snapshot, endpoint, path, request, reply);
    } catch (error) {
      request.log.error({ err: error }, 'proxy failure');
      writeRejection(reply.raw, rejection('internal_error', 'The router failed to handle this request.'), request.id);
    } finally {
      lease.release();
    }
  };
}

async function route(
  deps: ProxyDeps,
  hooks: DecideOptions,
  snapshot: Snapshot,
  endpoint: Endpoint,
  path: string,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<void> {
  const { metrics } = deps;
  const res = reply.raw;
  const t0 = performance.now();
  const facts = requestFacts({ requestId: request.id, endpoint, headers: request.headers, body: request.body }, factsOptionsOf(snapshot));
  // A shared quota store may need one bounded round trip first (docs/quotas.md);
  // decide() then checks synchronously. The wait is not decision time.
  let waitedMs = 0;
  for (let round = 0, wait = quotaWait(deps.env.quota, facts, snapshot, deps.env.now()); wait && round < QUOTA_WAIT_ROUNDS; round++) {
    const waitStart = performance.now();
    await wait;
    waitedMs += performance.now() - waitStart;
    wait = quotaWait(deps.env.quota, facts, snapshot, deps.env.now());
  }
  let decision = decide(facts, snapshot, deps.fleet, deps.env, hooks);
  metrics.decisionSeconds.observe((performance.now() - t0 - waitedMs) / 1000);
  deps.decisions.add(decision);

  if (decision.status !== 200) {
    if (decision.action) deps.coldLoads.trigger(decision.action.model, decision.action.url, decision.rejection?.retryAfterS ?? 60);
    reject(deps, request, res, decision);
    return;
  }

  const body = request.body as Record<string, unknown>;
  const stream = body.stream === true;
  // Serialized once, for every attempt. A copy only when the model changes.
  const upstreamBody = JSON.stringify(body.model === decision.upstreamModel ? body : { ...body, model: decision.upstreamModel });
  let failed: Set<string> | undefined; // made on the first retry
  let result: AttemptResult;
  for (;;) {
    result = await send(deps, snapshot, decision, path, upstreamBody, stream, request, res, failed !== undefined);
    if (result.kind !== 'retryable') break;
    deps.fleet.markFailure(decision.replica!, result.detail);
    (failed ??= new Set()).add(decision.replica!);
    metrics.retries.inc({ pool: decision.pool!, cause: result.cause });
    const retry = decide(facts as RequestFacts, snapshot, deps.fleet, deps.env, { ...hooks, excludeReplicas: failed, quotaTaken: true });
    deps.decisions.add(retry);
    if (retry.status !== 200) {
      // Nowhere left to go: every replica is down or failed this request.
      const none = rejection('no_healthy_replica', `No replica of pool ${decision.pool} could take the request (${result.detail}). Retry after 2 s.`, { retryAfterS: 2 });
      reject(deps, request, res, { ...retry, rejection: none, status: none.status, reason: none.message });
      return;
    }
    decision = retry;
  }

  const outcome = outcomeOf(result);
  metrics.requests.inc({ model: decision.model!, pool: decision.pool!, outcome });
  if (result.kind === 'failed') writeRejection(res, result.rejection, request.id);
  for (const slot of decision.poolRef!.chain) {
    try {
      slot.instance.onCompleted?.(decision.routed!, decision.replica!, outcome === 'ok');
    } catch (error) {
      deps.onStrategyFault?.(decision.poolRef!, slot.name, 'threw', `onCompleted: ${(error as Error)?.message}`);
    }
  }
  request.log.info(
    {
      model: `${decision.model}@${decision.version}`,
      adapter: decision.adapter,
      pool: decision.pool,
      replica: decision.replica,
      strategy: decision.strategy,
      status: result.kind === 'done' ? result.status : result.kind === 'failed' ? result.rejection.status : undefined,
      outcome,
      retried: failed !== undefined,
      ttfbMs: 'ttfbMs' in result ? Math.round(result.ttfbMs) : undefined,
      durationMs: Math.round(performance.now() - t0),
    },
    'routed',
  );
}

async function send(
  deps: ProxyDeps,
  snapshot: Snapshot,
  decision: Decision,
  path: string,
  body: string,
  stream: boolean,
  request: FastifyRequest,
  res: FastifyReply['raw'],
  retried: boolean,
): Promise<AttemptResult> {
  const pool = decision.poolRef!;
  const replica = replicaOf(pool, decision.replica!);
  const releaseInFlight = deps.fleet.acquire(replica.id);
  deps.metrics.decisions.inc({ pool: pool.name, replica: replica.id, strategy: decision.strategy ?? 'unknown' });
  const started = performance.now();
  const headers = [
    'x-request-id', request.id,
    'x-switchyard-model', `${decision.model}@${decision.version}`,
    'x-switchyard-pool', pool.name,
    'x-switchyard-replica', replica.id,
    'x-switchyard-reason', asciiHeader(decision.reason),
    'x-switchyard-policy', String(snapshot.generation),
  ];
  if (decision.adapter) headers.push('x-switchyard-adapter', decision.adapter);
  if (retried) headers.push('x-switchyard-retried', 'true');
  let dispatcher;
  try {
    dispatcher = deps.upstreams.poolFor(deps.urlOf(replica), pool.upstream);
  } catch (error) {
    // A replica a reload just added may not be reachable yet (an emulated one still starting).
    releaseInFlight();
    return { kind: 'retryable', cause: 'connect', detail: (error as Error).message };
  }
  try {
    const result = await attempt({
      dispatcher,
      path,
      body,
      requestId: request.id,
      decision,
      stream,
      res,
      responseHeaders: headers,
    });
    if (result.kind === 'done' || result.kind === 'broken') {
      deps.metrics.ttfbSeconds.observe({ pool: pool.name }, result.ttfbMs / 1000);
      deps.metrics.upstreamSeconds.observe({ pool: pool.name }, (performance.now() - started) / 1000);
    }
    return result;
  } finally {
    releaseInFlight();
  }
}

function reject(deps: ProxyDeps, request: FastifyRequest, res: FastifyReply['raw'], decision: Decision): void {
  const r = decision.rejection!;
  deps.metrics.rejections.inc({ reason: r.code });
  deps.metrics.requests.inc({ model: decision.model ?? 'unknown', pool: decision.pool ?? 'none', outcome: 'rejected' });
  writeRejection(res, r, request.id);
  request.log.info({ status: r.status, reject: r.code, model: decision.model, pool: decision.pool }, 'rejected');
}

function replicaOf(pool: Pool, id: string): ReplicaSpec {
  for (const replica of pool.replicas) if (replica.id === id) return replica;
  throw new Error(`replica ${id} is not in pool ${pool.name}`);
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
      return 'upstream_error';
  }
}
