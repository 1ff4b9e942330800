// A real redis-server on a free loopback port, started and stopped by a test.
// No Redis installed is a failure with the fix in it, never a silent skip:
// .ci/run installs Debian's redis-server.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { freePort } from '../observe/process.ts';

export interface TestRedis {
  readonly port: number;
  readonly url: string;
  /** Kills the server (SIGKILL: a crash, not a shutdown). */
  kill(): Promise<void>;
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>;
  /** Sends one command and returns the raw reply text (tests plant garbage with it). */
  command(...args: string[]): Promise<string>;
  stop(): Promise<void>;
}

export function requireRedisServer(): void {
  const found = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (found.error || found.status !== 0) {
    throw new Error('redis-server is not installed: these tests need a real Redis. Install it with `apt-get install -y redis-server` (.ci/run does).');
  }
}

export async function startRedis(): Promise<TestRedis> {
  requireRedisServer();
  const port = await freePort();
  let child: ChildProcess | undefined;

  const launch = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        if ((await send(port, ['PING'])).startsWith('+PONG')) return;
      } catch {
        // not listening yet
      }
      if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
      if (Date.now() > deadline) throw new Error('redis-server did not answer PING within 10 s');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };
  const kill = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((resolve) => c.once('exit', resolve));
    c.kill('SIGKILL');
    await exited;
  };
  await launch();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill,
    restart: launch,
    command: (...args) => send(port, args),
    stop: kill,
  };
}

/** One RESP command on a fresh connection; the reply's raw text. */
function send(port: number, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const timer = setTimeout(() => socket.destroy(new Error('redis command timed out')), 5000);
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`));
    socket.on('data', (chunk) => {
      text += chunk;
      if (text.endsWith('\r\n')) {
        clearTimeout(timer);
        socket.end();
        resolve(text);
      }
    });
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}
