// Every secret the router holds (the admin token, engines' API keys, the
// Redis password) is registered here, so that text from outside the router's
// own code (a plugin's reason, an engine's error) can be scrubbed of them
// before it reaches a header, a log line or the explorer.

const REDACTED = '[redacted]';
/** Shorter values are too likely to occur by chance to scrub (and too weak to be worth hiding). */
const MIN_SECRET_CHARS = 8;

const secrets = new Set<string>();

/** Registers a secret; a value shorter than 8 characters is ignored. */
export function addSecret(value: string | undefined): void {
  if (value !== undefined && value.length >= MIN_SECRET_CHARS) secrets.add(value);
}

/** Registers the password in a URL's credentials (`redis://:PASSWORD@host`), as written and decoded; the user name is no secret. */
export function addUrlCredentials(url: string | undefined): void {
  if (url === undefined) return;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return;
  }
  addSecret(parsed.password);
  try {
    addSecret(decodeURIComponent(parsed.password));
  } catch {
    // Not valid percent-encoding: the form as written is registered.
  }
}

/** Forgets a secret that is no longer held (a key rotated away on reload). */
export function removeSecret(value: string | undefined): void {
  if (value !== undefined) secrets.delete(value);
}

/** The text with every registered secret replaced by "[redacted]". */
export function redactSecrets(text: string): string {
  if (secrets.size === 0) return text;
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  return out;
}

/** For tests: forget every secret. */
export function clearSecrets(): void {
  secrets.clear();
}
