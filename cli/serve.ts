// `switchyard serve`: run the router until SIGTERM (graceful) or SIGINT.
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import type { Logger as SdkLogger } from '../sdk/index.ts';
import { routerLogger } from '../core/observe/logger.ts';
import { formatProblem, PolicyError } from '../core/policy/problems.ts';
import { PolicyStore } from '../core/policy/store.ts';
import { startRouter } from '../core/serve/server.ts';
import { EmbeddedFleet } from '../sim/emulator/embedded-fleet.ts';
import { UsageError } from './usage.ts';

const HELP = `Usage: switchyard serve [--policies DIR] [--port 8080] [--host 127.0.0.1] [--log-level info] [--emulator-speed 1]
                        [--control-plane URL [--control-plane-ttl-ms 30000] [--state-dir DIR]]

  --policies DIR        policy directory (default: policies/)
  --port N              port to listen on (default 8080; 0 picks a free one)
  --host H              address to listen on (default 127.0.0.1; 0.0.0.0 for all)
  --log-level L         fatal, error, warn, info, debug or silent (default info)
  --emulator-speed X    run emulate:// replicas X times faster than real engines (default 1)
  --control-plane URL   take models and pools (a kind: routing-table document) from this URL too
  --control-plane-ttl-ms N   how often to ask it (default 30000)
  --state-dir DIR       where the last good routing table is kept across restarts

Policies and plugins are watched: a change applies without a restart, a broken
one is refused and the running policy kept. SIGHUP or POST /admin/reload reloads now.

Environment: SWITCHYARD_ADMIN_TOKEN protects /admin/* (without it, loopback only).`;

export async function runServe(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      policies: { type: 'string', default: 'policies' },
      port: { type: 'string', default: '8080' },
      host: { type: 'string', default: '127.0.0.1' },
      'log-level': { type: 'string', default: 'info' },
      'emulator-speed': { type: 'string', default: '1' },
      'control-plane': { type: 'string' },
      'control-plane-ttl-ms': { type: 'string', default: '30000' },
      'state-dir': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be a port number, not "${values.port}"`);
  const speed = Number(values['emulator-speed']);
  if (!(speed > 0)) throw new UsageError(`--emulator-speed must be a positive number, not "${values['emulator-speed']}"`);
  const levels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  if (!levels.includes(values['log-level']!)) throw new UsageError(`--log-level must be one of ${levels.join(', ')}`);

  const ttlMs = Number(values['control-plane-ttl-ms']);
  if (!(ttlMs > 0)) throw new UsageError(`--control-plane-ttl-ms must be a positive number, not "${values['control-plane-ttl-ms']}"`);

  const log = routerLogger({ level: values['log-level'] });
  const storeLog: SdkLogger = { info: (message, fields) => log.info(fields ?? {}, message), warn: (message, fields) => log.warn(fields ?? {}, message) };
  let store: PolicyStore;
  try {
    store = await PolicyStore.open({
      dir: values.policies!,
      seed: Date.now(),
      log: storeLog,
      controlPlane: values['control-plane']
        ? { url: values['control-plane'], ttlMs, log: storeLog, cacheFile: values['state-dir'] ? join(values['state-dir'], 'routing-table.json') : undefined }
        : undefined,
    });
  } catch (error) {
    if (!(error instanceof PolicyError)) throw error;
    for (const problem of error.problems) console.error(formatProblem(problem));
    console.error(`serve: the policies in ${values.policies} are invalid; nothing was started`);
    return 1;
  }
  await store.watch();
  const router = await startRouter({
    policy: store,
    port,
    host: values.host,
    logger: log,
    replicas: new EmbeddedFleet({ speed, host: '127.0.0.1' }),
    adminToken: process.env.SWITCHYARD_ADMIN_TOKEN || undefined,
  });
  router.app.log.info({ url: router.url, policies: values.policies, replicas: store.current().replicas.size }, 'switchyard is routing');
  process.on('SIGHUP', () => void store.reload('SIGHUP'));

  return new Promise<number>((resolve) => {
    const stop = (signal: string) => {
      router.app.log.info({ signal }, 'shutting down: finishing in-flight requests');
      router
        .close()
        .then(() => store.close())
        .then(
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
