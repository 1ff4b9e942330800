// Dispatches `switchyard <command>`. Whatever goes wrong, a person sees one
// clear line and an exit code (2: a usage mistake, 1: anything else), never
// a stack trace.
import { readFileSync } from 'node:fs';
import { runExplain } from './explain.ts';
import { oneLine, UsageError, USAGE } from './usage.ts';
import { argErrorMessage } from './arg-errors.ts';
import { runValidate } from './validate.ts';

type Command = (argv: string[]) => Promise<number | void> | number | void;

const commands: Record<string, () => Promise<Command>> = {
  validate: async () => runValidate,
  explain: async () => runExplain,
  serve: async () => (await import('./serve.ts')).runServe,
  emulate: async () => (await import('../sim/emulator/command.ts')).runEmulateCommand,
  sim: async () => (await import('./sim.ts')).runSim,
  diff: async () => (await import('./diff.ts')).runDiff,
  experiment: async () => (await import('./experiment.ts')).runExperiment,
};

/** The version in package.json: the one source of truth for releases. */
export function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-v' || name === 'version') {
    console.log(`switchyard ${version()}`);
    return 0;
  }
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(USAGE);
    return name ? 0 : 2;
  }
  const load = commands[name];
  if (!load) {
    console.error(`switchyard: unknown command "${name}"\n\n${USAGE}`);
    return 2;
  }
  try {
    const code = await (await load())(rest);
    return typeof code === 'number' ? code : 0;
  } catch (error) {
    if ((error as { code?: string })?.code?.startsWith?.('ERR_PARSE_ARGS')) {
      console.error(`switchyard ${name}: ${argErrorMessage(error as { code: string; message: string }, name)}`);
      return 2;
    }
    if (error instanceof UsageError) {
      console.error(`switchyard ${name}: ${(error as Error).message}`);
      return 2;
    }
    console.error(`switchyard ${name}: ${oneLine(error)}`);
    return 1;
  }
}
