// Responses API follow-ups (previous_response_id) must reach the engine that
// stored the response: vLLM keeps it in that process's memory. The router
// names the response itself: it sets vLLM's `request_id` field, which the
// engine uses as the response's id, to an id that carries a tag of the
// replica and of the conversation. Any router with the same policy reads the
// tag back, so follow-ups need no shared store and no router-to-router
// traffic, and survive router restarts (docs/serving.md, "Responses API").
import { createHash, randomBytes } from 'node:crypto';
import { rejection, type Rejection } from '../errors.ts';
import type { Generation } from '../decide/generation.ts';

/** resp_ (vLLM's prefix), sy1 (this scheme), 12 hex of replica tag, 16 of conversation, 16 random. */
const ID = /^resp_sy1([0-9a-f]{12})([0-9a-f]{16})[0-9a-f]{16}$/;

/** A replica's tag: a hash of its id, so ids do not spell the fleet's names to clients. */
export function replicaTag(replicaId: string): string {
  return createHash('sha256').update(`switchyard replica ${replicaId}`).digest('hex').slice(0, 12);
}

const tagsBySnapshot = new WeakMap<Generation, Map<string, string>>();

/** The replica id a tag stands for in this snapshot, if any. */
function replicaOfTag(snapshot: Generation, tag: string): string | undefined {
  let tags = tagsBySnapshot.get(snapshot);
  if (!tags) {
    tags = new Map();
    for (const id of snapshot.replicas.keys()) tags.set(replicaTag(id), id);
    tagsBySnapshot.set(snapshot, tags);
  }
  return tags.get(tag);
}

/** A new response id for a response made on `replicaId`, in `conversation` (16 hex) or a new one. */
export function mintResponseId(replicaId: string, conversation?: string): string {
  const random = randomBytes(16).toString('hex');
  return `resp_sy1${replicaTag(replicaId)}${conversation ?? random.slice(16)}${random.slice(0, 16)}`;
}

export interface ResponseChain {
  /** The conversation's 16 hex characters, carried from response to response. */
  readonly conversation: string;
  /** Where the previous response is stored, or the 404 when no replica of this policy holds it. */
  readonly replica: string | undefined;
  readonly notFound: Rejection;
}

/**
 * What a previous_response_id says: undefined when the router did not mint
 * it (a client's own id goes where the strategies send it, and the engine answers).
 */
export function readChain(snapshot: Generation, previousId: string): ResponseChain | undefined {
  const match = ID.exec(previousId);
  if (!match) return undefined;
  return { conversation: match[2], replica: replicaOfTag(snapshot, match[1]), notFound: responseNotFound(previousId) };
}

/** vLLM's words for an id it does not hold, and what to do about it. */
export function responseNotFound(id: string): Rejection {
  return rejection(
    'response_not_found',
    `Response with id '${id.slice(0, 64)}' not found. The replica that stored it is no longer serving; send the conversation again without previous_response_id.`,
    { param: 'previous_response_id' },
  );
}
