// ZeroMQ carries the engines' KV cache events, and nothing else does: it is
// an optional dependency (a native addon, and with its prebuilt binaries for
// every platform the largest package a router installs), loaded the first
// time a replica with `kv_events` needs it. Where it is missing (it could not
// be installed on this platform, or was removed to slim an image) the router
// routes as before; a replica that asks for KV events gets a log line saying
// what to install (docs/kv-events.md).
export type ZeroMq = typeof import('zeromq');

let loading: Promise<ZeroMq> | undefined;

export function loadZeroMq(): Promise<ZeroMq> {
  loading ??= import('zeromq').catch((error: Error) => {
    loading = undefined; // installed later: the next call tries again
    throw new Error(`KV events need the optional package zeromq, which did not load (${error.message.split('\n')[0]}). Install it: npm install zeromq@6.8.0.`);
  });
  return loading;
}
