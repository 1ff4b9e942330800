// A user's mistake on the command line gets one clear line and exit code 2,
// never a stack trace.

export class UsageError extends Error {}

export const USAGE = `Usage: switchyard <command> [options]

Commands:
  serve     [--policies DIR] [--port 8080] [--host 127.0.0.1] [--admin-port 8081]
                                                                  run the router (every flag also from SWITCHYARD_* env)
  validate  [DIR]                                                 check a policy directory
  explain   [--policies DIR] --request FILE [--header 'Name: value']... [--fleet FILE] [--json]
                                                                  where would this request go, and why?
  emulate   --profile NAME [--port 8000] [--engine vllm|sglang] [--speed X]
                                                                  an emulated vLLM/SGLang replica
  sim       [--policies DIR] --workload FILE [--seed N] [--out DIR] [--json]
                                                                  simulate a policy against a workload
  sim       [--policies DIR] --replay FILE [--json]                 simulate a policy against recorded traffic (serve --record)
  diff      --replay FILE --policies A --policies B [--json]      compare two policies on recorded traffic, request by request
  experiment NAME|all [--out DIR]                                 the simulator experiments of docs/experiments.md

DIR defaults to policies/.
Run 'switchyard <command> --help' for a command's options; 'switchyard --version' for the version.`;

/** An error as one line: its message (and code), without the stack. */
export function oneLine(error: unknown): string {
  const e = error as { message?: unknown; code?: unknown } | null;
  const message = typeof e?.message === 'string' && e.message ? e.message : String(error);
  const first = message.split('\n')[0].slice(0, 500);
  return typeof e?.code === 'string' && !first.includes(e.code) ? `${first} (${e.code})` : first;
}
