// A user's mistake on the command line gets one clear line and exit code 2,
// never a stack trace.

export class UsageError extends Error {}

export const USAGE = `Usage: switchyard <command> [options]

Commands:
  serve     --policies DIR [--port 8080] [--host 127.0.0.1]      run the router
  validate  [DIR]                                                 check a policy directory (default policies/)
  explain   --policies DIR --request FILE [--header 'Name: value']... [--fleet FILE] [--json]
                                                                  where would this request go, and why?
  emulate   --port N --profile NAME [--engine vllm|sglang] [--speed X]
                                                                  an emulated vLLM/SGLang replica
  sim       --policies DIR --workload FILE [--seed N] [--out DIR] simulate a policy against a workload
  experiment NAME [--out DIR]                                     the reference text's experiments B-F

Run 'switchyard <command> --help' for a command's options.`;

/** An error as one line: its message (and code), without the stack. */
export function oneLine(error: unknown): string {
  const e = error as { message?: unknown; code?: unknown } | null;
  const message = typeof e?.message === 'string' && e.message ? e.message : String(error);
  const first = message.split('\n')[0].slice(0, 500);
  return typeof e?.code === 'string' && !first.includes(e.code) ? `${first} (${e.code})` : first;
}
