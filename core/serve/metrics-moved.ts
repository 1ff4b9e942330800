// GET /metrics on the public listener: a 404 that says where the metrics
// are. They name pools, replicas and plugins, which API clients are not
// shown (decision headers are minimal by default), so only the admin
// listener serves them (docs/serving.md, "Endpoints").
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorBody, rejection } from '../errors.ts';
import { rejectionHeaders } from './rejections.ts';

export function metricsMovedHandler(request: FastifyRequest, reply: FastifyReply): void {
  const r = rejection(
    'route_not_found',
    'Metrics are served on the admin listener only (--admin-port, default 8081): scrape http://ADMIN_HOST:8081/metrics. To scrape from another machine, bind it with --admin-host and set SWITCHYARD_ADMIN_TOKEN (docs/deploy.md).',
  );
  reply.code(404).headers(rejectionHeaders(r, request.id)).send(errorBody(r));
}
