// `switchyard emulate --port N --profile NAME [--engine vllm|sglang]
// [--speed X] [--model NAME] [--host H] [--lora NAME]...`: starts one
// emulated replica, prints its URL, and serves until SIGINT/SIGTERM (or the
// given signal).
// A bad flag gets one line on stderr and exit code 2, never a stack trace.
import { parseArgs } from 'node:util';
import { PROFILE_NAMES } from '../engine/profiles.ts';
import type { EngineKind } from './metrics.ts';
import { startEmulator, type Emulator, type EmulatorOptions } from './server.ts';

export const EMULATE_USAGE = `usage: switchyard emulate --profile NAME [--port N] [--host H] [--engine vllm|sglang]
                          [--speed X] [--model NAME] [--lora NAME]... [--tokenizer DIR]
                          [--kv-events ENDPOINT [--kv-events-topic T] [--kv-events-replay ENDPOINT] [--kv-hash-seed S]] [--api-key KEY]
  --profile   engine profile: ${PROFILE_NAMES.join(', ')}
  --port      port to listen on (default 8000; 0 picks a free one)
  --host      address to bind (default 127.0.0.1)
  --engine    whose API and metric names to speak (default vllm)
  --speed     run the profile's timing X times faster (default 1)
  --model     served model name (default: the profile's model)
  --lora      a LoRA adapter to register and pre-load; repeat for more
  --kv-events publish KV cache events as vLLM does (ZeroMQ PUB), e.g. tcp://127.0.0.1:5557
  --kv-events-topic  their topic (default kv-events)
  --kv-events-replay serve missed batches again on this endpoint (vLLM's replay_endpoint), e.g. tcp://127.0.0.1:5558
  --kv-hash-seed     seed the block hashes (vLLM's PYTHONHASHSEED; random per process without it)
  --tokenizer the model's Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json):
              prompts are rendered with its chat template and tokenized, blocks cached and hashed as vLLM does
  --api-key   require "Authorization: Bearer KEY" on /v1 routes, as vLLM does (default: $VLLM_API_KEY)`;

export interface CommandIO {
  readonly stdout?: { write(text: string): unknown };
  readonly stderr?: { write(text: string): unknown };
  /** Stops the server when aborted; without it, SIGINT and SIGTERM do. */
  readonly signal?: AbortSignal;
  /** Called once the server listens (tests use it to reach the server). */
  readonly onListening?: (emulator: Emulator) => void;
}

class UsageError extends Error {}

/** Reads the flags into emulator options; throws UsageError with a one-line message. */
export function parseEmulateArgs(argv: readonly string[]): EmulatorOptions | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        profile: { type: 'string' },
        engine: { type: 'string' },
        speed: { type: 'string' },
        model: { type: 'string' },
        lora: { type: 'string', multiple: true },
        'kv-events': { type: 'string' },
        'kv-events-topic': { type: 'string' },
        'kv-events-replay': { type: 'string' },
        'kv-hash-seed': { type: 'string' },
        tokenizer: { type: 'string' },
        'api-key': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    throw new UsageError(`${(error as Error).message.split('\n')[0]} (see --help)`);
  }
  const values = parsed.values;
  if (values.help) return 'help';

  if (values.profile === undefined) throw new UsageError(`--profile is required (one of: ${PROFILE_NAMES.join(', ')})`);
  if (!PROFILE_NAMES.includes(values.profile)) {
    throw new UsageError(`unknown profile '${values.profile}' (known: ${PROFILE_NAMES.join(', ')})`);
  }
  const port = values.port === undefined ? 8000 : Number(values.port);
  if (!/^\d+$/.test(values.port ?? '8000') || !Number.isInteger(port) || port > 65535) {
    throw new UsageError(`--port must be an integer from 0 to 65535, got '${values.port}'`);
  }
  const engine = values.engine ?? 'vllm';
  if (engine !== 'vllm' && engine !== 'sglang') throw new UsageError(`--engine must be vllm or sglang, got '${engine}'`);
  const speed = values.speed === undefined ? 1 : Number(values.speed);
  if (values.speed !== undefined && (values.speed.trim() === '' || !(speed > 0) || !Number.isFinite(speed))) {
    throw new UsageError(`--speed must be a positive number, got '${values.speed}'`);
  }
  if (values.model !== undefined && values.model === '') throw new UsageError('--model must not be empty');
  if (values['api-key'] !== undefined && values['api-key'] === '') throw new UsageError('--api-key must not be empty');
  const kvEvents = values['kv-events'];
  if (kvEvents !== undefined && !/^(tcp|ipc):\/\/\S{1,200}$/.test(kvEvents)) {
    throw new UsageError(`--kv-events must be a ZeroMQ endpoint such as tcp://127.0.0.1:5557, got '${kvEvents}'`);
  }
  const replay = values['kv-events-replay'];
  if (replay !== undefined && !/^(tcp|ipc):\/\/\S{1,200}$/.test(replay)) {
    throw new UsageError(`--kv-events-replay must be a ZeroMQ endpoint such as tcp://127.0.0.1:5558, got '${replay}'`);
  }
  if (values.tokenizer !== undefined && values.tokenizer.trim() === '') throw new UsageError('--tokenizer must name a folder');

  return {
    port,
    host: values.host ?? '127.0.0.1',
    profile: values.profile,
    engine: engine as EngineKind,
    speed,
    servedModelName: values.model,
    adapters: values.lora ?? [],
    kvEvents,
    kvEventsTopic: values['kv-events-topic'],
    kvEventsReplay: replay,
    kvHashSeed: values['kv-hash-seed'],
    tokenizer: values.tokenizer,
    // vLLM reads VLLM_API_KEY when --api-key is not given.
    ...((values['api-key'] ?? process.env.VLLM_API_KEY) ? { apiKey: values['api-key'] ?? process.env.VLLM_API_KEY } : {}),
  };
}

/** Runs the command; resolves with the process exit code once the server has stopped. */
export async function runEmulateCommand(argv: readonly string[], io: CommandIO = {}): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  let options: EmulatorOptions | 'help';
  try {
    options = parseEmulateArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    stderr.write(`switchyard emulate: ${error.message}\n`);
    return 2;
  }
  if (options === 'help') {
    stdout.write(EMULATE_USAGE + '\n');
    return 0;
  }

  let emulator: Emulator;
  try {
    emulator = await startEmulator(options);
  } catch (error) {
    // A busy port or an address we cannot bind: the user's to fix, so one line.
    stderr.write(`switchyard emulate: cannot listen on ${options.host}:${options.port}: ${(error as Error).message}\n`);
    return 1;
  }
  // The URL alone on stdout, for scripts; what it is on stderr, for people.
  stdout.write(`${emulator.url}\n`);
  stderr.write(
    `switchyard emulate: ${options.engine ?? 'vllm'} replica, profile ${String(options.profile)}, speed ${options.speed ?? 1}x, at ${emulator.url}\n`,
  );
  io.onListening?.(emulator);

  await new Promise<void>((resolve) => {
    if (io.signal) {
      if (io.signal.aborted) resolve();
      else io.signal.addEventListener('abort', () => resolve(), { once: true });
      return;
    }
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  await emulator.close();
  return 0;
}
