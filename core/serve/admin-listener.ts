// The admin listener: /admin/* (and the probes and /metrics) on their own
// address, loopback by default. Admin routes are never on the public
// listener: behind a reverse proxy on the same host every client's source
// address is 127.0.0.1, so "loopback source means trusted" can't be judged
// per request there; a separate socket can. Bound beyond loopback, it
// refuses to start without a token.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { adminOriginGuard } from './admin-origin.ts';
import { adminGuard, registerAdminRoutes, registerProbeRoutes, type AdminHooks } from './admin-routes.ts';
import { errorBody, rejection } from '../errors.ts';
import { errorHandler } from './http-errors.ts';
import { rejectionHeaders } from './rejections.ts';

export interface AdminListenerOptions {
  /** Default 8081; 0 picks a free port. */
  readonly port?: number;
  /** Default 127.0.0.1. Any other address needs `token`. */
  readonly host?: string;
  /** Required as `Authorization: Bearer TOKEN` on /admin/* when set. */
  readonly token?: string;
}

export const DEFAULT_ADMIN_PORT = 8081;
export const DEFAULT_ADMIN_HOST = '127.0.0.1';

/** A host name or address that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host) || host.startsWith('::ffff:127.');
}

/** Throws (with a message for a person) when the options would open admin to the network. */
export function checkAdminOptions(options: AdminListenerOptions): void {
  const host = options.host ?? DEFAULT_ADMIN_HOST;
  if (!isLoopbackHost(host) && !options.token) {
    throw new Error(`the admin listener on ${host} would be reachable from other machines: set SWITCHYARD_ADMIN_TOKEN, or bind it to 127.0.0.1`);
  }
}

export async function startAdminListener(
  options: AdminListenerOptions,
  hooks: AdminHooks,
  logger: FastifyBaseLogger | false,
  /** More admin routes (the decision explorer), given the same token guard. */
  more?: (app: FastifyInstance, guard: ReturnType<typeof adminGuard>) => void,
  /** false: no port opens, the app answers `inject()` only (url ''). */
  listen = true,
): Promise<{ app: FastifyInstance; url: string }> {
  checkAdminOptions(options);
  const app = Fastify({
    ...(logger ? { loggerInstance: logger.child({ listener: 'admin' }) } : { logger: false }),
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: 64 * 1024,
    forceCloseConnections: true,
    // Bodies are checked as sent: "no" is not a boolean.
    ajv: { customOptions: { coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: false } },
  });
  app.setErrorHandler(errorHandler);
  // Before any route, the 404s included: no answer goes to a rebound host name or another site's page.
  app.addHook('onRequest', adminOriginGuard(options.host ?? DEFAULT_ADMIN_HOST));
  app.setNotFoundHandler((request, reply) => {
    const r = rejection(
      'route_not_found',
      `No route ${request.method} ${request.url.split('?')[0].slice(0, 200)} on the admin listener. It serves /admin/state, /admin/decisions, /admin/reload, /admin/replicas/ID/drain, /admin/explorer, /healthz, /readyz and /metrics.`,
    );
    reply.code(404).headers(rejectionHeaders(r, request.id)).send(errorBody(r));
  });
  registerProbeRoutes(app, hooks);
  registerAdminRoutes(app, hooks, options.token);
  more?.(app, adminGuard(options.token));
  if (!listen) {
    await app.ready();
    return { app, url: '' };
  }
  const address = await app.listen({ port: options.port ?? DEFAULT_ADMIN_PORT, host: options.host ?? DEFAULT_ADMIN_HOST });
  return { app, url: address.replace('[::1]', '127.0.0.1') };
}
