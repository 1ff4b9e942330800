// `switchyard serve`: run the router until SIGTERM (graceful) or SIGINT.
import { parseArgs } from 'node:util';
import { builtinRegistry } from '../plugins/builtins.ts';
import { loadPolicyDir } from '../policy/load.ts';
import { formatProblem } from '../policy/problems.ts';
import { fixedPolicy } from '../serve/fixed-policy.ts';
import { routerLogger } from '../observe/logger.ts';
import { startRouter } from '../serve/server.ts';
import { UsageError } from './usage.ts';

const HELP = `Usage: switchyard serve [--policies DIR] [--port 8080] [--host 127.0.0.1] [--log-level info] [--emulator-speed 1]

  --policies DIR        policy directory (default: policies/)
  --port N              port to listen on (default 8080; 0 picks a free one)
  --host H              address to listen on (default 127.0.0.1; 0.0.0.0 for all)
  --log-level L         fatal, error, warn, info, debug or silent (default info)
  --emulator-speed X    run emulate:// replicas X times faster than real engines (default 1)

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

  const loaded = loadPolicyDir(values.policies!, { registry: builtinRegistry, seed: Date.now() });
  if (!loaded.snapshot) {
    for (const problem of loaded.problems) console.error(formatProblem(problem));
    console.error(`serve: the policies in ${values.policies} are invalid; nothing was started`);
    return 1;
  }
  const router = await startRouter({
    policy: fixedPolicy(loaded.snapshot),
    port,
    host: values.host,
    logger: routerLogger({ level: values['log-level'] }),
    emulatorSpeed: speed,
    adminToken: process.env.SWITCHYARD_ADMIN_TOKEN || undefined,
  });
  router.app.log.info({ url: router.url, policies: values.policies, replicas: loaded.snapshot.replicas.size }, 'switchyard is routing');

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
