// `switchyard serve`: run the router until SIGTERM (graceful) or SIGINT.
// Every flag can also come from the environment (settings.ts); start-up
// failures are one line and exit code 1, and the ports are tried before the
// policy loads so that a busy port is reported at once.
import { createServer } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Logger as SdkLogger } from '../sdk/index.ts';
import { KvIndex } from '../core/fleet/kv-index.ts';
import { KvEventFeed, kvEventSources } from '../core/fleet/kv-subscriber.ts';
import { registerKvMetrics } from '../core/observe/kv-metrics.ts';
import { routerLogger } from '../core/observe/logger.ts';
import { addSecret, addUrlCredentials } from '../core/observe/secrets.ts';
import { DEFAULT_WATCHDOG_MS, startWatchdog } from '../core/observe/watchdog.ts';
import { PolicyStore } from '../core/decide/store.ts';
import { openQuotaStore } from '../core/quota/open.ts';
import { checkAdminOptions, DEFAULT_ADMIN_HOST, DEFAULT_ADMIN_PORT } from '../core/serve/admin-listener.ts';
import { startRouter } from '../core/serve/server.ts';
import { Lifetime } from '../core/serve/lifetime.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';
import { EmbeddedFleet } from '../sim/emulator/embedded-fleet.ts';
import { PROFILE_NAMES } from '../sim/engine/profiles.ts';
import { AdminTokenError, readAdminToken } from './admin-token.ts';
import { parseArgsOptions, portSetting, positiveSetting, resolveSettings, settingsHelp, type Setting } from './settings.ts';
import { oneLine, UsageError } from './usage.ts';
import { version } from './main.ts';
import { formatProblem, PolicyError } from '../core/diagnostics/problem.ts';
import { openShadowAndRecorder, SHADOW_SETTINGS, shadowSettings } from './serve-shadow.ts';
import { preloadTokenizers } from '../core/tokens/preload.ts';
import { TokenizerService } from '../core/tokens/service.ts';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

const TRACING_EXPORTERS = ['off', 'otlp', 'console'] as const;
/** /readyz waits at most this long for the policy's tokenizer folders (a Llama 3 tokenizer loads in seconds; a hung one must not keep the router out of service). */
const TOKENIZER_READY_WAIT_MS = 120_000;

export const SERVE_SETTINGS: readonly Setting[] = [
  { flag: 'policies', arg: 'DIR', env: ['SWITCHYARD_POLICIES'], default: 'policies', help: 'policy directory' },
  { flag: 'port', arg: 'N', env: ['SWITCHYARD_PORT', 'PORT'], default: '8080', help: 'public port (0 picks a free one)' },
  { flag: 'host', arg: 'H', env: ['SWITCHYARD_HOST'], default: '127.0.0.1', help: 'public address (0.0.0.0 for all)' },
  {
    flag: 'admin-port',
    arg: 'N',
    env: ['SWITCHYARD_ADMIN_PORT'],
    default: String(DEFAULT_ADMIN_PORT),
    help: 'admin listener port: /admin/*, probes, /metrics',
  },
  {
    flag: 'admin-host',
    arg: 'H',
    env: ['SWITCHYARD_ADMIN_HOST'],
    default: DEFAULT_ADMIN_HOST,
    help: 'admin listener address; beyond loopback it needs SWITCHYARD_ADMIN_TOKEN',
  },
  { flag: 'log-level', arg: 'L', env: ['SWITCHYARD_LOG_LEVEL'], default: 'info', help: LOG_LEVELS.join(', ') },
  { flag: 'emulator-speed', arg: 'X', env: ['SWITCHYARD_EMULATOR_SPEED'], default: '1', help: 'run emulate:// replicas X times faster than real engines' },
  { flag: 'control-plane', arg: 'URL', env: ['SWITCHYARD_CONTROL_PLANE'], help: 'take models and pools (a kind: routing-table document) from this URL too' },
  { flag: 'control-plane-ttl-ms', arg: 'N', env: ['SWITCHYARD_CONTROL_PLANE_TTL_MS'], default: '30000', help: 'how often to ask it' },
  { flag: 'state-dir', arg: 'DIR', env: ['SWITCHYARD_STATE_DIR'], help: 'where the last good routing table is kept across restarts' },
  {
    flag: 'tracing',
    arg: 'E',
    env: ['SWITCHYARD_TRACING'],
    default: 'off',
    help: 'OpenTelemetry traces: off, otlp (to OTEL_EXPORTER_OTLP_ENDPOINT) or console',
  },
  {
    flag: 'tracing-sample-ratio',
    arg: 'R',
    env: ['SWITCHYARD_TRACING_SAMPLE_RATIO'],
    default: '1',
    help: 'share of new traces recorded, 0..1 (a traced parent decides for its children)',
  },
  {
    flag: 'redis',
    arg: 'URL',
    env: ['SWITCHYARD_REDIS_URL'],
    help: "share tenant quotas with every router on this Redis (redis://host:6379); wins over settings' quota_store.redis_url",
  },
  {
    flag: 'watchdog-ms',
    arg: 'N',
    env: ['SWITCHYARD_WATCHDOG_MS'],
    default: String(DEFAULT_WATCHDOG_MS),
    help: 'exit when the event loop is blocked this long (0: off)',
  },
  ...SHADOW_SETTINGS,
];

const HELP = `Usage: switchyard serve [options]

${settingsHelp(SERVE_SETTINGS)}

A flag wins over its environment variable; SWITCHYARD_PORT wins over PORT.

Environment only:
  SWITCHYARD_ADMIN_TOKEN   when set, /admin/* needs "Authorization: Bearer TOKEN";
                           required when --admin-host is not a loopback address
  SWITCHYARD_ADMIN_TOKEN_FILE
                           read the token from this file instead (a mounted
                           Secret: it stays out of the environment); not both

Policies and plugins are watched: a change applies without a restart, a broken
one is refused and the running policy kept. SIGHUP or POST /admin/reload (on the
admin listener) reloads now and answers live, unchanged or refused.`;

export async function runServe(argv: string[]): Promise<number> {
  const { values: flags } = parseArgs({ args: argv, options: { ...parseArgsOptions(SERVE_SETTINGS), help: { type: 'boolean', short: 'h' } } });
  if (flags.help) {
    console.log(HELP);
    return 0;
  }
  const values = resolveSettings(SERVE_SETTINGS, flags);
  const port = portSetting('port', values.port);
  const adminPort = portSetting('admin-port', values['admin-port']);
  const host = values.host!;
  const adminHost = values['admin-host']!;
  const speed = positiveSetting('emulator-speed', values['emulator-speed']);
  const ttlMs = positiveSetting('control-plane-ttl-ms', values['control-plane-ttl-ms']);
  const watchdogMs = values['watchdog-ms'] === '0' ? 0 : positiveSetting('watchdog-ms', values['watchdog-ms']);
  if (!LOG_LEVELS.includes(values['log-level']!)) throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, not "${values['log-level']}"`);
  if (!(TRACING_EXPORTERS as readonly string[]).includes(values.tracing!))
    throw new UsageError(`--tracing must be one of ${TRACING_EXPORTERS.join(', ')}, not "${values.tracing}"`);
  const sampleRatio = Number(values['tracing-sample-ratio']);
  if (!/^\d*\.?\d+$/.test(values['tracing-sample-ratio'] ?? '') || !(sampleRatio >= 0 && sampleRatio <= 1)) {
    throw new UsageError(`--tracing-sample-ratio must be a number from 0 to 1, not "${values['tracing-sample-ratio']}"`);
  }
  const redisUrl = values.redis;
  if (redisUrl !== undefined && !/^rediss?:\/\//.test(redisUrl)) throw new UsageError(`--redis must be a redis:// or rediss:// URL, not "${redisUrl}"`);
  const shadowed = shadowSettings(values);
  let adminToken: string | undefined;
  try {
    adminToken = readAdminToken(process.env);
  } catch (error) {
    if (!(error instanceof AdminTokenError)) throw error;
    console.error(`switchyard serve: ${error.message}`);
    return 1;
  }
  // Text from outside the router's code (a plugin's reason, its log lines) is scrubbed of these.
  addSecret(adminToken);
  const admin = { port: adminPort, host: adminHost, token: adminToken };
  try {
    checkAdminOptions(admin);
  } catch (error) {
    console.error(`switchyard serve: ${(error as Error).message}`);
    return 1;
  }

  // Before the policy loads (which may take a while with plugins): a busy port now is one line now.
  for (const [what, h, p] of [
    ['port', host, port],
    ['admin port', adminHost, adminPort],
  ] as const) {
    const problem = await bindProblem(h, p);
    if (problem) {
      console.error(`switchyard serve: cannot listen on ${h}:${p} (${what}): ${problem}`);
      return 1;
    }
  }

  const log = routerLogger({ level: values['log-level'] });
  const storeLog: SdkLogger = { info: (message, fields) => log.info(fields ?? {}, message), warn: (message, fields) => log.warn(fields ?? {}, message) };
  // Replicas with kv_events publish their KV cache: strategies see it as ctx.kvIndex.
  const kvIndex = new KvIndex({ now: Date.now });
  let store: PolicyStore;
  try {
    store = await PolicyStore.open({
      dir: values.policies!,
      builtins: BUILTIN_STRATEGIES,
      seed: Date.now(),
      // A reload naming an engine profile the emulator lacks is refused, not half applied.
      emulatedProfiles: PROFILE_NAMES,
      log: storeLog,
      kvIndex,
      controlPlane: values['control-plane']
        ? { url: values['control-plane'], ttlMs, log: storeLog, cacheFile: values['state-dir'] ? join(values['state-dir'], 'routing-table.json') : undefined }
        : undefined,
    });
  } catch (error) {
    if (!(error instanceof PolicyError)) throw error;
    for (const problem of error.problems) console.error(formatProblem(problem));
    console.error(`switchyard serve: the policies in ${values.policies} are invalid; nothing was started`);
    return 1;
  }
  // Everything built from here on registers how it closes; one close() shuts it all, newest first (core/serve/lifetime.ts).
  const lifetime = new Lifetime({ error: (fields, message) => log.error(fields, message) });
  lifetime.own('policy store', () => store.close());
  // Loaded now, not on each model's first request; /readyz waits for them.
  const tokenizers = preloadTokenizers(store.current(), { maxWaitMs: TOKENIZER_READY_WAIT_MS, log: storeLog });
  lifetime.own('tokenizers', () => TokenizerService.shared().close());
  const extras = await openShadowAndRecorder(shadowed, { builtins: BUILTIN_STRATEGIES, kvIndex, log: storeLog });
  if ('error' in extras) {
    for (const line of extras.error) console.error(line);
    await lifetime.close(0);
    return 1;
  }
  const { shadow, recorder } = extras;
  lifetime.own('shadow policy', () => shadow.close());
  lifetime.own('traffic recorder', () => recorder?.close());
  addUrlCredentials(redisUrl ?? store.current().settings.quotaStore.redisUrl);
  const quota = await openQuotaStore(store.current().settings.quotaStore, redisUrl, storeLog);
  lifetime.own('quota store', () => quota.close?.());
  let router: Awaited<ReturnType<typeof startRouter>>;
  const tracing =
    values.tracing === 'off' ? undefined : (await import('./tracing.ts')).startTracing(values.tracing as 'otlp' | 'console', sampleRatio, version());
  lifetime.own('tracing', () => tracing?.shutdown());
  try {
    await store.watch();
    router = await startRouter({
      tracer: tracing?.tracer,
      quota,
      policy: store,
      port,
      host,
      logger: log,
      replicas: new EmbeddedFleet({ speed, host: '127.0.0.1' }),
      admin,
      shadow,
      recorder,
      kvIndex,
      lifetime,
      ready: tokenizers.ready,
    });
  } catch (error) {
    await lifetime.close(0).catch(() => {});
    const e = error as { code?: string; address?: string; port?: number };
    const where =
      e.code === 'EADDRINUSE' || e.code === 'EACCES' || e.code === 'EADDRNOTAVAIL'
        ? `cannot listen on ${e.address ?? '?'}:${e.port ?? '?'}: `
        : 'could not start: ';
    console.error(`switchyard serve: ${where}${oneLine(error)}`);
    return 1;
  }
  const watchdog = watchdogMs > 0 ? startWatchdog({ thresholdMs: watchdogMs, name: 'switchyard serve' }) : undefined;
  // The watchdog watches the shutdown too.
  lifetime.own('watchdog', () => watchdog?.stop(), { last: true });
  router.app.log.info(
    { url: router.url, admin: router.adminUrl, policies: values.policies, replicas: store.current().replicas.size, watchdogMs },
    'switchyard is routing',
  );
  process.on('SIGHUP', () => {
    void store.reload('SIGHUP').then(
      (outcome) => router.app.log.info({ result: outcome.result, errors: outcome.errors }, `SIGHUP: policy ${outcome.result}`),
      (error) => router.app.log.error({ err: error }, 'SIGHUP: reload failed'),
    );
  });
  const kvFeed = new KvEventFeed(kvIndex, storeLog);
  lifetime.own('KV event feed', () => kvFeed.close());
  kvFeed.sync(kvEventSources(store.current().replicas.values()));
  lifetime.onSwap((snapshot) => kvFeed.sync(kvEventSources(snapshot.replicas.values())));
  registerKvMetrics(router.metrics.registry, kvIndex);

  return new Promise<number>((resolve) => {
    const stop = (signal: string) => {
      router.app.log.info({ signal }, 'shutting down: finishing in-flight requests');
      router.close().then(
        () => resolve(0),
        (error) => {
          router.app.log.error({ err: error }, 'shutdown failed');
          resolve(1);
        },
      );
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
}

/** Why `host:port` can't be bound right now, or undefined when it can (it is released again at once). */
function bindProblem(host: string, port: number): Promise<string | undefined> {
  if (port === 0) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      const why =
        error.code === 'EADDRINUSE'
          ? 'the address is already in use'
          : error.code === 'EACCES'
            ? 'permission denied'
            : error.code === 'EADDRNOTAVAIL'
              ? 'no such local address'
              : oneLine(error);
      resolve(why);
    });
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}
