import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseEmulateArgs, runEmulateCommand } from '../../sim/emulator/command.ts';
import type { Emulator } from '../../sim/emulator/server.ts';

function capture() {
  const out: string[] = [];
  return { out, stream: { write: (text: string) => out.push(text) } };
}

async function run(argv: string[]) {
  const stdout = capture();
  const stderr = capture();
  const code = await runEmulateCommand(argv, { stdout: stdout.stream, stderr: stderr.stream, signal: AbortSignal.abort() });
  return { code, stdout: stdout.out.join(''), stderr: stderr.out.join('') };
}

describe('switchyard emulate', () => {
  for (const [argv, message] of [
    [['--port', '8000'], /--profile is required/],
    [['--profile', 'h200-giant'], /unknown profile 'h200-giant' \(known: .*tiny/],
    [['--profile', 'tiny', '--port', 'eighty'], /--port must be an integer/],
    [['--profile', 'tiny', '--port', '70000'], /--port must be an integer/],
    [['--profile', 'tiny', '--speed', '0'], /--speed must be a positive number/],
    [['--profile', 'tiny', '--speed', 'fast'], /--speed must be a positive number/],
    [['--profile', 'tiny', '--engine', 'tgi'], /--engine must be vllm or sglang/],
    [['--profile', 'tiny', '--verbose'], /Unknown option '--verbose'/],
    [['--profile', 'tiny', 'extra'], /positional argument/],
  ] as const) {
    it(`refuses ${argv.join(' ')} with one line and exit code 2`, async () => {
      const result = await run([...argv]);
      assert.equal(result.code, 2);
      assert.match(result.stderr, message);
      assert.equal(result.stderr.trim().split('\n').length, 1);
      assert.doesNotMatch(result.stderr, /\n\s+at /);
      assert.equal(result.stdout, '');
    });
  }

  it('prints its usage for --help', async () => {
    const result = await run(['--help']);
    assert.equal(result.code, 0);
    assert.match(result.stdout, /usage: switchyard emulate/);
  });

  it('reads every flag', () => {
    const flags = ['--profile', 'tiny', '--port', '0', '--engine', 'sglang', '--speed', '2.5', '--model', 'm', '--lora', 'a', '--lora', 'b'];
    const kv = [
      '--kv-events',
      'tcp://127.0.0.1:5557',
      '--kv-events-topic',
      'kv',
      '--kv-events-replay',
      'tcp://127.0.0.1:5558',
      '--kv-hash-seed',
      '7',
      '--tokenizer',
      'models/llama',
    ];
    assert.deepEqual(parseEmulateArgs([...flags, ...kv]), {
      port: 0,
      host: '127.0.0.1',
      profile: 'tiny',
      engine: 'sglang',
      speed: 2.5,
      servedModelName: 'm',
      adapters: ['a', 'b'],
      kvEvents: 'tcp://127.0.0.1:5557',
      kvEventsTopic: 'kv',
      kvEventsReplay: 'tcp://127.0.0.1:5558',
      kvHashSeed: '7',
      tokenizer: 'models/llama',
    });
    assert.throws(() => parseEmulateArgs([...flags, '--kv-events', 'http://x']), /--kv-events must be a ZeroMQ endpoint/);
  });

  it('serves until stopped, printing its URL', async () => {
    const controller = new AbortController();
    const stdout = capture();
    const stderr = capture();
    let emulator: Emulator | undefined;
    const exit = runEmulateCommand(['--profile', 'tiny', '--port', '0', '--model', 'served-name'], {
      stdout: stdout.stream,
      stderr: stderr.stream,
      signal: controller.signal,
      onListening: (e) => (emulator = e),
    });
    while (!emulator) await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(stdout.out.join(''), `${emulator.url}\n`);
    const models = (await (await fetch(`${emulator.url}/v1/models`)).json()) as { data: { id: string }[] };
    assert.equal(models.data[0].id, 'served-name');
    controller.abort();
    assert.equal(await exit, 0);
  });
});
