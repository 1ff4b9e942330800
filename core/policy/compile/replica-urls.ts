// What a replica's `url` must be for the router to reach it at run time:
// an engine's base URL (the router appends /v1/... itself), or
// emulate://PROFILE naming an engine profile the embedder can start.
const API_PATH = /\/v1(\/|$)/;

/** The problem with `url` as a replica address, or undefined when it is fine. `emulatedProfiles`: the profiles emulate:// may name (unchecked when absent). */
export function replicaUrlProblem(url: string, emulatedProfiles?: readonly string[]): string | undefined {
  if (url.startsWith('emulate://')) {
    const profile = url.slice('emulate://'.length);
    if (emulatedProfiles && !emulatedProfiles.includes(profile)) {
      return `"${url}" names no engine profile: emulate:// takes one of ${emulatedProfiles.join(', ')}`;
    }
    return undefined;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `"${url}" is not a URL: give the engine's base URL, like http://10.0.0.5:8000`;
  }
  if (parsed.search || parsed.hash) return `"${url}" has a query or fragment: give the engine's base URL, like ${parsed.origin}`;
  if (API_PATH.test(parsed.pathname)) {
    const base = `${parsed.origin}${parsed.pathname.replace(/\/v1(\/.*)?\/*$/, '')}`;
    return `"${url}" includes the API path: give the engine's base URL (${base}); the router adds /v1/... to it`;
  }
  return undefined;
}
