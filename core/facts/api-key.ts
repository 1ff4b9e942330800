// The API key's digest, from the header that carries it: tenants are looked
// up by the sha256 of their key (policies hold digests, never keys). A
// client sends the same header on every request, so the digests of recent
// header values are remembered: a map lookup instead of the regex and a
// sha256 on every request (docs/decide.md, round 8). Bounded in entries and
// in the length of a value remembered; a flood of new values only empties
// the memo, each then costing what it cost before. (The memo keeps recent
// keys in memory a while longer than their requests did.)
import { hash } from 'node:crypto';

/** Header values remembered per header, at most; the memo starts afresh when full. */
const MAX_REMEMBERED = 512;
/** Longer header values are hashed every time: a memo of long strings would hold too much. */
const MAX_REMEMBERED_CHARS = 256;

export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex'); // one-shot: half the cost of a Hash object per request
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;
const bearerDigests = new Map<string, string>();
const apiKeyDigests = new Map<string, string>();

/** The digest of the key in an Authorization header's value, or undefined when it is not "Bearer <key>". */
export function bearerKeyHash(authorization: string): string | undefined {
  const known = bearerDigests.get(authorization);
  if (known !== undefined) return known;
  const match = BEARER.exec(authorization);
  if (!match) return undefined;
  return remember(bearerDigests, authorization, sha256Hex(match[1]));
}

/** The digest of the key in an x-api-key header's value (Anthropic's clients), its surrounding whitespace dropped. */
export function apiKeyHeaderHash(value: string): string {
  return apiKeyDigests.get(value) ?? remember(apiKeyDigests, value, sha256Hex(value.trim()));
}

function remember(memo: Map<string, string>, value: string, digest: string): string {
  if (value.length <= MAX_REMEMBERED_CHARS) {
    if (memo.size >= MAX_REMEMBERED) memo.clear();
    memo.set(value, digest);
  }
  return digest;
}
