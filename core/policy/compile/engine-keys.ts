// Engine API keys (api_key_env on a pool or replica): read from the router's
// environment each time the policy is compiled, so a reload picks up a
// rotated key, and registered as secrets so no log line, error or page the
// router writes can show one (core/observe/secrets.ts).
import { addSecret } from '../../observe/secrets.ts';

/** The key the variable holds, or undefined when it is unset or blank. */
export function engineKey(variable: string): string | undefined {
  const key = process.env[variable]?.trim();
  if (!key) return undefined;
  addSecret(key);
  return key;
}
