// A strategy's reason is text from a plugin: it goes into the decision log,
// the trace and (when decision headers are on) a response header. Capped and
// made printable here, once, for every strategy.
const MAX_REASON_CHARS = 200;
// Control characters (C0, DEL, C1) and the Unicode line/paragraph separators.
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;

export function cleanReason(reason: unknown): string {
  const text = typeof reason === 'string' ? reason : reason == null ? '' : String(reason);
  const capped = text.length > MAX_REASON_CHARS ? `${text.slice(0, MAX_REASON_CHARS - 1)}…` : text;
  UNPRINTABLE.lastIndex = 0;
  return UNPRINTABLE.test(capped) ? capped.replace(UNPRINTABLE, ' ') : capped;
}
