// The admin listener against web pages (docs/serving.md, "The admin listener
// and browsers"). Without a token it trusts whoever reaches it, and a browser
// on the operator's machine reaches it too: a page can make the browser send
// requests to 127.0.0.1:8081 (CSRF), or point its own host name at 127.0.0.1
// and read the answers (DNS rebinding). So the admin listener answers only
// requests that name it by a host it knows, that no other site's page sent,
// and, for state changes, that a page could not send without a CORS
// preflight (which the admin listener never grants).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorBody, rejection } from '../errors.ts';
import { rejectionHeaders } from './rejections.ts';

/** The header a body-less state change (a drain, a reload) carries to prove it is no cross-site form. */
export const ADMIN_INTENT_HEADER = 'x-switchyard-admin';

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);
const WILDCARDS = new Set(['0.0.0.0', '::', '[::]']);

/** The host part of a Host header (`name`, `name:port`, `[v6]:port`), lower-cased; undefined when malformed. */
function hostName(host: string): string | undefined {
  const match = /^(\[[0-9a-f:.]{2,45}\]|[a-z0-9.-]{1,253})(?::\d{1,5})?$/i.exec(host);
  return match?.[1].toLowerCase();
}

function refuse(request: FastifyRequest, reply: FastifyReply, message: string) {
  const r = rejection('permission_denied', message);
  return reply.code(403).headers(rejectionHeaders(r, request.id)).send(errorBody(r));
}

/**
 * Refuses a request whose Host is neither a loopback name nor the host the
 * listener was configured with (DNS rebinding), and one a page of another
 * origin sent (its `Origin` or `Sec-Fetch-Site` says so). Bound to every
 * address (0.0.0.0, which needs a token), any Host is accepted: a token a
 * page cannot know guards it, and operators reach it by names the router
 * cannot list.
 */
export function adminOriginGuard(configuredHost: string) {
  const own = configuredHost.toLowerCase();
  const anyHost = WILDCARDS.has(own);
  const known = (name: string) => anyHost || LOOPBACK_NAMES.has(name) || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name) || name === own || name === `[${own}]`;
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const host = request.headers.host;
    // Every browser sends Host; a tool that does not is no page.
    if (host !== undefined) {
      const name = hostName(host);
      if (name === undefined || !known(name)) {
        return refuse(
          request,
          reply,
          `The admin listener does not answer to Host "${host.slice(0, 100)}"; reach it as 127.0.0.1, localhost or ${configuredHost}.`,
        );
      }
    }
    const site = request.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none') {
      return refuse(
        request,
        reply,
        `The admin listener refuses requests sent by another site's page (Sec-Fetch-Site: ${String(site).slice(0, 20)}); open its pages from the admin listener itself, or use curl.`,
      );
    }
    const origin = request.headers.origin;
    if (origin !== undefined && host !== undefined && origin !== `http://${host}` && origin !== `https://${host}`) {
      return refuse(
        request,
        reply,
        `The admin listener refuses requests from another origin (${origin.slice(0, 100)}); open its pages from the admin listener itself, or use curl.`,
      );
    }
  };
}

/**
 * State changes (drain, reload) must be requests a page cannot send without
 * a preflight: a JSON body, an Authorization header, or the
 * `x-switchyard-admin` header. A bare cross-site form or `fetch` with
 * `mode: "no-cors"` has none of these.
 */
export async function requireNonSimple(request: FastifyRequest, reply: FastifyReply) {
  const type = request.headers['content-type'];
  if (typeof type === 'string' && /^application\/json\s*(;|$)/i.test(type)) return;
  if (request.headers.authorization !== undefined || request.headers[ADMIN_INTENT_HEADER] !== undefined) return;
  return refuse(
    request,
    reply,
    `A state change needs a JSON body ("Content-Type: application/json") or the header "${ADMIN_INTENT_HEADER}: 1" (curl -X POST -H '${ADMIN_INTENT_HEADER}: 1' ...), so that no web page can send it.`,
  );
}
