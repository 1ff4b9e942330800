// Which header names a request's conversation. Agent clients each send their
// own (Claude Code x-claude-code-session-id, others session-id or
// x-session-affinity); the policy lists the ones to read (settings
// conversation_headers), the first one present wins.

/** The default list, in the order they are read. */
export const DEFAULT_CONVERSATION_HEADERS: readonly string[] = Object.freeze([
  'x-conversation-id',
  'x-session-affinity',
  'session-id',
  'x-claude-code-session-id',
]);

/** The first non-empty header of `names` (lower case) and its value. */
export function conversationFrom(
  headers: Readonly<Record<string, string | string[] | undefined>>,
  names: readonly string[],
): { header: string; value: string } | undefined {
  for (const name of names) {
    const raw = headers[name];
    const value = Array.isArray(raw) ? raw[0] : raw;
    if (value) return { header: name, value };
  }
  return undefined;
}
