// The admin token `serve` requires on /admin/*: from SWITCHYARD_ADMIN_TOKEN or
// from a file named by SWITCHYARD_ADMIN_TOKEN_FILE (a mounted Kubernetes
// Secret: the token then stays out of the process's environment, which any
// code in the process can read back from /proc/self/environ). Both at once
// is refused: which one wins would be a guess.
import { readFileSync, statSync } from 'node:fs';

/** A token file is a line, not a document: larger is a wrong path. */
const MAX_TOKEN_FILE_BYTES = 4096;

export class AdminTokenError extends Error {}

export function readAdminToken(env: NodeJS.ProcessEnv): string | undefined {
  const inline = env.SWITCHYARD_ADMIN_TOKEN || undefined;
  const file = env.SWITCHYARD_ADMIN_TOKEN_FILE || undefined;
  if (inline !== undefined && file !== undefined) {
    throw new AdminTokenError(
      'SWITCHYARD_ADMIN_TOKEN and SWITCHYARD_ADMIN_TOKEN_FILE are both set; unset one (the file keeps the token out of the environment)',
    );
  }
  if (file === undefined) return inline;
  let text: string;
  try {
    const size = statSync(file).size;
    if (size > MAX_TOKEN_FILE_BYTES)
      throw new AdminTokenError(
        `SWITCHYARD_ADMIN_TOKEN_FILE ${file} is ${size} bytes; a token file holds one line (at most ${MAX_TOKEN_FILE_BYTES} bytes): check the path`,
      );
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if (error instanceof AdminTokenError) throw error;
    throw new AdminTokenError(`cannot read SWITCHYARD_ADMIN_TOKEN_FILE ${file}: ${(error as Error).message}; point it at a readable file holding the token`);
  }
  // `echo TOKEN > file` and Secrets made from files end with a newline: surrounding whitespace is not part of a token.
  const token = text.trim();
  if (token === '') throw new AdminTokenError(`SWITCHYARD_ADMIN_TOKEN_FILE ${file} is empty; write the token into it`);
  if (/\s/.test(token)) throw new AdminTokenError(`SWITCHYARD_ADMIN_TOKEN_FILE ${file} holds more than one word; it must hold the token alone`);
  return token;
}
