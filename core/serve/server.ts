// `switchyard serve`: the OpenAI-compatible router. Wires the policy, the
// live fleet, the upstream pools and the observability around the proxy.
import type { Tracer } from '@opentelemetry/api';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance } from 'fastify';
import type { DecideEnv } from '../decide/env.ts';
import { createEnv } from '../decide/env.ts';
import type { QuotaStore } from '../decide/quota.ts';
import type { StrategyFault } from '../decide/replica.ts';
import { BODY_SCHEMAS } from '../facts/request-schemas.ts';
import { LiveFleet } from '../fleet/live-fleet.ts';
import { DecisionLog } from '../observe/decision-log.ts';
import { RouterMetrics } from '../observe/metrics.ts';
import type { Pool, RouterSettings, Generation } from '../decide/generation.ts';
import { checkAdminOptions, startAdminListener, type AdminListenerOptions } from './admin-listener.ts';
import { registerProbeRoutes, type AdminHooks } from './admin-routes.ts';
import { registerExplorerRoutes } from './explorer-routes.ts';
import { ColdLoads } from './cold-loads.ts';
import { clientErrorHandler, errorHandler, frameworkErrors, LogBudget, notFoundHandler, toRejection } from './http-errors.ts';
import { recordRefusal } from './refusals.ts';
import { metricsMovedHandler } from './metrics-moved.ts';
import { Waiting } from './forward.ts';
import { registerJsonParser } from './json-body.ts';
import { installConnectionGate } from './connection-gate.ts';
import { earlyAdmission } from './early-admission.ts';
import { writeRejection } from './rejections.ts';
import { rejection } from '../errors.ts';
import { modelsHandler } from './models-route.ts';
import { proxyHandler, type GenerationSource, type ProxyDeps } from './proxy.ts';
import { registerVllmRoutes, VLLM_ROUTE_PATHS } from './vllm-routes.ts';
import { DIRECT_REPLICAS, type ReplicaAddresses } from './replica-addresses.ts';
import { RetryBudget } from './retry-budget.ts';
import { SilenceWatch } from './silence.ts';
import { BaseLatency } from '../fleet/base-latency.ts';
import type { CachedPrefixLookup } from '../fleet/uncached-prompt.ts';
import { Upstreams } from './upstream.ts';
import { Lifetime } from './lifetime.ts';
import { observerSubscriber } from './request-observer.ts';
import { RequestLifecycle } from './request-lifecycle.ts';
import { lazyRequestLogger } from './request-log.ts';
import { decisionLogSubscriber, logLineSubscriber, metricsSubscriber } from './request-subscribers.ts';
import { tracingSubscriber } from './request-tracing.ts';
import type { TrafficRecorder } from '../shadow/recorder.ts';
import type { Shadow } from '../shadow/shadow.ts';
import { registerShadowMetrics } from '../shadow/shadow-metrics.ts';
import { registerShadowRoutes } from '../shadow/shadow-routes.ts';

/** A policy source that can also reload and report (the PolicyStore). */
export interface ServedPolicy extends GenerationSource {
  /** Called with each new snapshot after a successful reload. */
  onSwap?(listener: (snapshot: Generation) => void): void;
  /** Reload attempts (`reload`: live, unchanged, refused) and control-plane states (`control-plane`). */
  on?(event: 'reload' | 'control-plane', listener: (event: { result?: string; state?: string }) => void): unknown;
  reload?(reason: string): Promise<Record<string, unknown>>;
  status?(): Record<string, unknown>;
}

export interface RouterOptions {
  /** OpenTelemetry tracing (off when absent): a span per request, its decision and its upstream attempts. */
  readonly tracer?: Tracer;
  readonly policy: ServedPolicy;
  readonly port?: number;
  readonly host?: string;
  /** Pino options, a logger, or false for silence. */
  readonly logger?: boolean | Record<string, unknown> | FastifyBaseLogger;
  /**
   * The admin listener (/admin/*, probes, /metrics): default 127.0.0.1:8081;
   * false for none. The public listener never serves /admin/*.
   */
  readonly admin?: AdminListenerOptions | false;
  /**
   * Where each replica is reached. The default takes `url` as it is; the CLI
   * passes the emulated fleet here so that `emulate://` replicas resolve to
   * engines it starts itself (core never imports the emulator).
   */
  readonly replicas?: ReplicaAddresses;
  readonly env?: DecideEnv;
  /** Tenant quotas when no env is given (a shared store, say); in memory by default. */
  readonly quota?: QuotaStore;
  /** Overrides the policy's scrape and health intervals (tests). */
  readonly scrapeIntervalMs?: number;
  readonly healthIntervalMs?: number;
  /** Overrides the settings' client bounds (tests use short timeouts). */
  readonly limits?: Partial<ClientLimits>;
  /** The shadow policy (docs/changing-policy.md): decides sampled requests again, never acts; /admin/shadow. */
  readonly shadow?: Shadow;
  /** Records every routed request, without its prompt, for replay (docs/changing-policy.md). */
  readonly recorder?: TrafficRecorder;
  /** false: everything is built but no port opens; requests go in through `app.inject()` (tests). */
  readonly listen?: boolean;
  /** The KV event index: the token load counts only the prompt a replica does not cache (core/fleet/uncached-prompt.ts). */
  readonly kvIndex?: CachedPrefixLookup;
  /**
   * Where the router registers how each of its parts closes, and what follows
   * a new generation (lifetime.ts): `serve` passes its own, holding what it
   * built before the router, so that one close() shuts everything in order.
   */
  readonly lifetime?: Lifetime;
  /** What else /readyz waits for (serve: the policy's tokenizer folders, core/tokens/preload.ts). */
  readonly ready?: () => boolean;
}

/** What a client connection may send and hold: settings.yaml, read when serve starts (docs/reliability.md). */
export type ClientLimits = Pick<
  RouterSettings,
  | 'bodyLimitBytes'
  | 'maxHeaderBytes'
  | 'maxJsonDepth'
  | 'maxJsonValues'
  | 'headersTimeoutMs'
  | 'requestTimeoutMs'
  | 'keepAliveTimeoutMs'
  | 'maxConnections'
  | 'sendTimeoutMs'
  | 'maxConnectionsPerClient'
  | 'maxPipelinedRequests'
  | 'maxRequestsPerConnectionPerSecond'
  | 'largeBodyBytes'
  | 'maxLargeBodiesPerClient'
  | 'maxLargeBodiesPerTenant'
>;

export interface Router {
  readonly app: FastifyInstance;
  /** The public listener's base URL ('' with `listen: false`). */
  readonly url: string;
  /** The admin listener's app and base URL (absent with `admin: false`). */
  readonly admin?: FastifyInstance;
  readonly adminUrl?: string;
  readonly fleet: LiveFleet;
  readonly replicas: ReplicaAddresses;
  readonly metrics: RouterMetrics;
  readonly decisions: DecisionLog;
  /** Each request's lifecycle: subscribe to watch requests in process (a subscriber that throws is logged, never the request's problem). */
  readonly lifecycle: RequestLifecycle;
  /** Stops accepting, lets in-flight requests finish (bounded), then stops everything. */
  close(graceMs?: number): Promise<void>;
}

const FAULT_LOG_INTERVAL_MS = 60_000;
/** How long close() lets in-flight requests finish (deploy/ sizes the pod's termination grace from it). */
export const DRAIN_MS = 10_000;

export async function startRouter(options: RouterOptions): Promise<Router> {
  // Before anything starts: an admin door open to the network is a configuration error.
  if (options.admin !== false) checkAdminOptions(options.admin ?? {});
  const initial = options.policy.current();
  const metrics = new RouterMetrics();
  const decisions = new DecisionLog(1000);
  let app: FastifyInstance | undefined; // the fleet logs through it once it exists
  const lifetime = options.lifetime ?? new Lifetime({ error: (fields, message) => app?.log.error(fields, message) });
  // Each part is registered as it is built; close() runs them backwards (lifetime.ts).
  const replicas = options.replicas ?? DIRECT_REPLICAS;
  lifetime.own('replicas', () => replicas.close());
  const upstreams = new Upstreams();
  lifetime.own('upstream pools', () => upstreams.close());
  await replicas.sync(initial);

  const targets = (snapshot: Generation) =>
    [...snapshot.replicas.values()].map((r) => ({ id: r.id, url: replicas.urlOf(r), engine: r.engine, apiKey: r.apiKey }));
  const waiting = new Waiting();
  const fleet = new LiveFleet({
    replicas: targets(initial),
    scrapeIntervalMs: options.scrapeIntervalMs ?? initial.settings.scrapeIntervalMs,
    healthIntervalMs: options.healthIntervalMs ?? initial.settings.healthIntervalMs,
    log: {
      info: (message, fields) => app?.log.info(fields ?? {}, message),
      warn: (message, fields) => app?.log.warn(fields ?? {}, message),
    },
    onEjection: ({ replica, pool, ejection }) => {
      metrics.ejections.inc({ pool, replica, cause: ejection.cause });
      // Ejected for hanging: what still waits on it goes elsewhere now.
      if (ejection.cause === 'timeout' || ejection.cause === 'silence') waiting.abandon(replica, 'replica ejected for timeouts while this request waited');
    },
  });
  fleet.start();
  lifetime.own('fleet', () => fleet.stop());
  metrics.policyGeneration.set(initial.generation);
  // The initial load is a load: count it, and start every result at 0.
  metrics.seedReloads((options.policy.status?.() as { reloads?: Record<string, number> } | undefined)?.reloads ?? { live: 1 });
  for (const pool of initial.pools) metrics.seedPool(pool.key);

  const limits: ClientLimits = { ...initial.settings, ...options.limits };
  // node refuses a head timeout longer than the whole-request one.
  const headersTimeout = Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs);
  const logger = options.logger ?? { level: 'info' };
  const isInstance = typeof logger === 'object' && typeof (logger as FastifyBaseLogger).info === 'function';
  app = Fastify({
    ...(isInstance ? { loggerInstance: logger as FastifyBaseLogger } : { logger: logger as boolean | Record<string, unknown> }),
    // One line per request, written by the proxy with the decision in it.
    logController: new LogController({ disableRequestLogging: true }),
    // request.log is made on first use: a routed request's one line goes through the root logger (request-log.ts).
    childLoggerFactory: lazyRequestLogger,
    bodyLimit: limits.bodyLimitBytes,
    genReqId: requestIdGenerator(),
    forceCloseConnections: 'idle',
    // Slow or lying clients are closed: the head must arrive within headersTimeout,
    // the whole request (a trickled body, a Content-Length never met) within
    // requestTimeout, and an idle keep-alive connection goes after keepAliveTimeout.
    // node checks these every connectionsCheckingInterval (30 s by default: far too coarse).
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    http: {
      maxHeaderSize: limits.maxHeaderBytes,
      headersTimeout,
      connectionsCheckingInterval: Math.max(25, Math.min(1000, Math.floor(headersTimeout / 4))),
      // node's own 400 for a missing Host has an empty body; the router has no use for Host.
      requireHostHeader: false,
    },
    clientErrorHandler,
    frameworkErrors,
    // The body schemas check shape only: no coercion, no defaults, no removal,
    // so what the engine receives is what the client sent.
    ajv: { customOptions: { coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: false, allowUnionTypes: true } },
  });
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const api = request.routeOptions?.url?.startsWith('/v1/') === true || VLLM_ROUTE_PATHS.includes(request.routeOptions?.url ?? '');
    errorHandler(error, request, reply);
    // A request refused before its route ran still leaves a log line, a metric and a decision record.
    if (reply.statusCode < 500 && api) recordRefusal({ metrics, decisions }, request, toRejection(error, request.routeOptions.bodyLimit));
  });
  registerJsonParser(app, { maxDepth: limits.maxJsonDepth, maxValues: limits.maxJsonValues });
  // Connections past the cap are closed as they arrive, before any byte is read.
  app.server.maxConnections = limits.maxConnections;
  // ...and so are those past one client's share, pipelining depth or request rate (docs/reliability.md, "Floods").
  const gateLog = new LogBudget();
  installConnectionGate(app.server, limits, {
    closed: (bound, remoteAddress) => {
      const dropped = gateLog.take();
      if (dropped !== undefined)
        app?.log.warn({ bound, remoteAddress, ...(dropped ? { linesDropped: dropped } : {}) }, 'client connection closed: over a flood bound');
    },
  });
  // node answers an Expect it does not know with a bare 417: give it the OpenAI shape.
  app.server.on('checkExpectation', (_request, response) => {
    writeRejection(response, rejection('expectation_failed', 'Only "Expect: 100-continue" is supported.'), 'none');
  });
  app.setNotFoundHandler(notFoundHandler);

  const lastFaultLog = new Map<string, number>();
  const onStrategyFault = (pool: Pool, strategy: string, fault: StrategyFault, detail: string) => {
    metrics.strategyFaults.inc({ strategy, fault });
    const now = Date.now();
    if ((lastFaultLog.get(strategy) ?? 0) + FAULT_LOG_INTERVAL_MS > now) return;
    lastFaultLog.set(strategy, now);
    app.log.warn({ strategy, pool: pool.key, fault, detail }, 'strategy skipped (logged at most once a minute per strategy)');
  };

  // The deadline check adds the base latency the pools' streams show (core/fleet/base-latency.ts).
  const baseLatency = new BaseLatency();
  const givenEnv = options.env ?? createEnv({ seed: Date.now(), quota: options.quota });
  const liveEnv = givenEnv.baseLatencyMs ? givenEnv : { ...givenEnv, baseLatencyMs: (pool: string) => baseLatency.baseMs(pool) };
  // With a shadow, the live env's random draw is kept for the shadow to draw the same (core/shadow/random-tape.ts).
  const env = options.shadow ? options.shadow.attach({ env: liveEnv, fleet, metrics: registerShadowMetrics(metrics.registry) }) : liveEnv;
  // The in-memory store always answers; a shared store reports for itself.
  metrics.quotaStoreUp.set(1);
  env.quota.observe?.({
    failure: (reason) => metrics.quotaStoreFailures.inc({ reason }),
    up: (isUp) => metrics.quotaStoreUp.set(isUp ? 1 : 0),
    fetched: (seconds) => metrics.quotaLeaseSeconds.observe(seconds),
  });
  const coldLoads = new ColdLoads(app.log);
  // What is watched of each request subscribes to its lifecycle; outside instrumentation to diagnostics_channel (docs/observability.md).
  const lifecycle = new RequestLifecycle(app.log);
  lifecycle.subscribe(metricsSubscriber(metrics));
  lifecycle.subscribe(decisionLogSubscriber(decisions));
  if (options.tracer) lifecycle.subscribe(await tracingSubscriber(options.tracer));
  for (const observer of [options.shadow, options.recorder]) if (observer) lifecycle.subscribe(observerSubscriber(observer));
  lifecycle.subscribe(logLineSubscriber(app.log));
  const deps: ProxyDeps = {
    policy: options.policy,
    fleet,
    upstreams,
    retryBudget: new RetryBudget(),
    waiting,
    env,
    metrics,
    lifecycle,
    decisions,
    coldLoads,
    silence: new SilenceWatch(),
    baseLatency,
    kvIndex: options.kvIndex,
    sendTimeoutMs: limits.sendTimeoutMs,
    urlOf: (replica: Parameters<ReplicaAddresses['urlOf']>[0]) => replicas.urlOf(replica),
    onStrategyFault,
  };
  // The key and the large-body bounds are checked on the head, before the body is read (early-admission.ts).
  // Recorded like any refusal, but a flood of bad keys is not a flood of log lines and decision records.
  const earlyLog = new LogBudget();
  const early = earlyAdmission(
    () => options.policy.current(),
    limits,
    (request, r) => {
      const dropped = earlyLog.take();
      if (dropped === undefined) {
        metrics.rejections.inc({ reason: r.code });
        metrics.requests.inc({ model: 'unknown', pool: 'none', outcome: 'rejected' });
        return;
      }
      recordRefusal({ metrics, decisions }, request, r);
      request.log.info({ status: r.status, reject: r.code, reason: r.message.slice(0, 300), ...(dropped ? { linesDropped: dropped } : {}) }, 'rejected');
    },
  );
  app.post('/v1/chat/completions', { onRequest: early, schema: { body: BODY_SCHEMAS.chat } }, proxyHandler(deps, 'chat', '/v1/chat/completions'));
  app.post('/v1/completions', { onRequest: early, schema: { body: BODY_SCHEMAS.completions } }, proxyHandler(deps, 'completions', '/v1/completions'));
  app.post('/v1/embeddings', { onRequest: early, schema: { body: BODY_SCHEMAS.embeddings } }, proxyHandler(deps, 'embeddings', '/v1/embeddings'));
  registerVllmRoutes(app, deps, initial.settings.audioBodyLimitBytes, early);
  app.get(
    '/v1/models',
    modelsHandler(() => options.policy.current()),
  );

  let closing = false;
  const hooks: AdminHooks = {
    state: () => routerState(options.policy, fleet, coldLoads),
    history: () => ({ ...fleet.history.json() }),
    decisions: (limit) => decisions.recent(limit),
    reload: async () => (options.policy.reload ? options.policy.reload('admin') : { result: 'unsupported', message: 'this policy source does not reload' }),
    setDraining: (id, draining) => fleet.setDraining(id, draining),
    metrics: async () => {
      refreshReplicaGauges(metrics, options.policy.current(), fleet);
      const status = options.policy.status?.();
      refreshPluginGauges(metrics, status);
      metrics.policyDiskLive.set((status?.disk as { matchesLive?: boolean } | undefined)?.matchesLive === false ? 0 : 1);
      return { contentType: metrics.registry.contentType, body: await metrics.registry.metrics() };
    },
    ready: () => !closing && (options.ready?.() ?? true),
  };
  // Probes stay on the public port; /metrics, which names pools, replicas and plugins, and /admin/* do not (docs/serving.md).
  registerProbeRoutes(app, { ready: hooks.ready });
  app.get('/metrics', metricsMovedHandler);

  // The decision explorer is an admin page: it goes on the admin listener with the rest.
  const explorer = (adminApp: FastifyInstance, guard: Parameters<typeof registerExplorerRoutes>[2]) => {
    if (options.shadow) registerShadowRoutes(adminApp, options.shadow, guard, options.recorder);
    registerExplorerRoutes(
      adminApp,
      {
        stream: decisions.stream,
        snapshot: () => options.policy.current(),
        policyStatus: () => options.policy.status?.() ?? {},
        fleet: () => fleet,
        explainEnv: () => createEnv({ seed: 1 }),
      },
      guard,
    );
  };

  options.policy.on?.('reload', (outcome) => metrics.policyReloads.inc({ result: outcome.result! }));
  options.policy.on?.('control-plane', (status) => metrics.setControlPlaneUp(status.state === 'ok'));
  lifetime.onSwap(async (snapshot) => {
    await replicas.sync(snapshot);
    fleet.update(targets(snapshot));
    upstreams.retain(new Set([...snapshot.replicas.values()].map((r) => replicas.urlOf(r))));
    metrics.policyGeneration.set(snapshot.generation);
    for (const pool of snapshot.pools) metrics.seedPool(pool.key);
  });
  lifetime.follow(options.policy);

  let admin: Awaited<ReturnType<typeof startAdminListener>> | undefined;
  // Admin closes after the public app: operators can watch the drain on /admin/state.
  lifetime.own('admin listener', () => admin?.app.close());
  const publicApp = app;
  lifetime.own('public listener', (graceMs) => drain(publicApp, graceMs));
  // Watchers of the decision stream are not requests to finish: they go first.
  lifetime.own('decision stream', () => decisions.stream.close());
  let address: string;
  try {
    const listen = options.listen !== false;
    if (options.admin !== false) admin = await startAdminListener(options.admin ?? {}, hooks, app.log, explorer, listen);
    address = listen ? await app.listen({ port: options.port ?? 8080, host: options.host ?? '127.0.0.1' }) : (await app.ready(), '');
  } catch (error) {
    // Nothing half-started stays behind: the caller reports one line and exits.
    await lifetime.close(0).catch(() => {});
    throw error;
  }
  return {
    app,
    url: address.replace('[::1]', '127.0.0.1'),
    admin: admin?.app,
    adminUrl: admin?.url,
    fleet,
    replicas,
    metrics,
    decisions,
    lifecycle,
    close(graceMs = DRAIN_MS) {
      closing = true;
      return lifetime.close(graceMs);
    },
  };
}

/** Stops accepting and lets in-flight requests finish, bounded by `graceMs`; keep-alive connections go as soon as their response is done. */
async function drain(app: FastifyInstance, graceMs: number): Promise<void> {
  const sweep = setInterval(() => app.server.closeIdleConnections(), 50);
  await Promise.race([app.close(), new Promise((resolve) => setTimeout(resolve, graceMs).unref())]);
  clearInterval(sweep);
  app.server.closeAllConnections();
}

/** x-request-id from the client when it is sane, else a short unique id. */
function requestIdGenerator() {
  const prefix = Math.random().toString(36).slice(2, 8);
  let counter = 0;
  return (req: { headers: Record<string, string | string[] | undefined> }) => {
    const given = req.headers['x-request-id'];
    if (typeof given === 'string' && given.length > 0 && given.length <= 128 && /^[\x21-\x7e]+$/.test(given)) return given;
    return `req-${prefix}-${(counter++).toString(36)}`;
  };
}

function routerState(policy: ServedPolicy, fleet: LiveFleet, coldLoads: ColdLoads): Record<string, unknown> {
  const snapshot = policy.current();
  const specOf = new Map<string, { pool: string; adapters: readonly string[] }>();
  for (const pool of snapshot.pools) for (const r of pool.replicas) specOf.set(r.id, { pool: pool.key, adapters: r.adapters });
  return {
    policy: { generation: snapshot.generation, hash: snapshot.hash, files: snapshot.files, ...(policy.status?.() ?? {}) },
    // configuredAdapters: what the policy gives the replica; an idle engine reports no adapter loaded.
    replicas: fleet.list().map((r) => ({ pool: specOf.get(r.id)?.pool ?? null, configuredAdapters: specOf.get(r.id)?.adapters ?? [], ...r })),
    coldLoads: coldLoads.pendingLoads(),
  };
}

function refreshPluginGauges(metrics: RouterMetrics, status: Record<string, unknown> | undefined): void {
  metrics.pluginQuarantined.reset();
  const plugins = (status?.plugins ?? []) as { name: string; isolation?: { state: string; quarantine?: { reason: string } } }[];
  for (const plugin of plugins) {
    if (!plugin.isolation) continue;
    const quarantine = plugin.isolation.quarantine;
    metrics.pluginQuarantined.set({ plugin: plugin.name, reason: quarantine?.reason ?? 'none' }, plugin.isolation.state === 'quarantined' ? 1 : 0);
  }
}

function refreshReplicaGauges(metrics: RouterMetrics, snapshot: Generation, fleet: LiveFleet): void {
  const now = Date.now();
  // Replicas a reload removed must not linger as series.
  for (const gauge of [
    metrics.replicaKvUsage,
    metrics.replicaQueue,
    metrics.replicaInFlight,
    metrics.replicaSignalAge,
    metrics.replicaHealthy,
    metrics.replicaEjected,
    metrics.admission.replicaPrefillTokens,
    metrics.admission.replicaActiveStreams,
  ])
    gauge.reset();
  for (const pool of snapshot.pools) {
    for (const spec of pool.replicas) {
      const state = fleet.replica(spec.id);
      const labels = { replica: spec.id, pool: pool.key };
      metrics.replicaKvUsage.set(labels, state?.kvUsage ?? 0);
      metrics.replicaQueue.set(labels, state?.queueDepth ?? 0);
      metrics.replicaInFlight.set(labels, state?.inFlight ?? 0);
      metrics.admission.replicaPrefillTokens.set(labels, state?.prefillTokens ?? 0);
      metrics.admission.replicaActiveStreams.set(labels, state?.activeStreams ?? 0);
      metrics.replicaSignalAge.set(labels, state?.scrapedAt !== undefined ? (now - state.scrapedAt) / 1000 : Infinity);
      const health = state?.health ?? 'unknown';
      metrics.replicaHealthy.set(labels, health === 'ready' || health === 'unknown' ? 1 : 0);
      metrics.replicaEjected.set(labels, health === 'ejected' ? 1 : 0);
    }
  }
}
