// The baseline: a bare fastify + undici pass-through to one engine, with no
// routing at all. argv: ENGINE_URL
import Fastify from 'fastify';
import { Pool } from 'undici';
import { reportCpuOnRequest } from './cpu-reporter.ts';

const engine = new Pool(process.argv[2], { connections: 128, keepAliveTimeout: 4000 });
// bodyLimit: the router's own default (8 MiB), for the 1 MB prompts of bench:proxy.
const app = Fastify({ logger: false, bodyLimit: 8 * 1024 * 1024 });
for (const path of ['/v1/chat/completions', '/v1/completions']) {
  app.post(path, async (request, reply) => {
    const upstream = await engine.request({ path, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(request.body) });
    reply.code(upstream.statusCode).header('content-type', upstream.headers['content-type'] as string);
    return reply.send(upstream.body);
  });
}
const url = await app.listen({ port: 0, host: '127.0.0.1' });
reportCpuOnRequest();
process.send?.({ url });
