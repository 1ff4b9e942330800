// Child processes a test starts (the real `switchyard` CLI, Prometheus) and
// the free loopback ports they listen on. Every child is killed when the test ends.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

export const SWITCHYARD_BIN = new URL('../../bin/switchyard.mjs', import.meta.url).pathname;

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface Child {
  readonly process: ChildProcess;
  /** Everything it printed so far (stdout and stderr), for failure messages. */
  output(): string;
  stop(): Promise<void>;
}

export function startChild(command: string, args: string[], options: { cwd?: string; env?: Record<string, string> } = {}): Child {
  const child = spawn(command, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let printed = '';
  const keep = (chunk: Buffer) => {
    printed = (printed + chunk.toString()).slice(-20_000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    process: child,
    output: () => printed,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

export async function waitUntil<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number, child?: Child): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (child && (child.process.exitCode !== null || child.process.signalCode !== null)) {
      throw new Error(
        `gave up waiting for ${what}: the process exited (${child.process.exitCode ?? child.process.signalCode})\n--- output ---\n${child.output()}`,
      );
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${child ? `\n--- output ---\n${child.output()}` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * The addresses a `switchyard serve --port 0 --admin-port 0` child says it listens on. Ports the
 * router picks itself: a port found free and handed over can be taken by a parallel test meanwhile.
 */
export async function routingUrls(child: Child, timeoutMs = 60_000): Promise<{ url: string; adminUrl: string }> {
  return waitUntil('the router to say where it listens', async () => routingUrlsIn(child.output()), timeoutMs, child);
}

/** The addresses in a router's 'switchyard is routing' log line (info level), if it printed one yet. */
export function routingUrlsIn(output: string): { url: string; adminUrl: string } | undefined {
  const line = /"url":"(http:[^"]+)","admin":"(http:[^"]+)"[^\n]*"msg":"switchyard is routing"/.exec(output);
  return line ? { url: line[1], adminUrl: line[2] } : undefined;
}
