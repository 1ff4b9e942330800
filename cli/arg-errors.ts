// node's parseArgs errors, said for a person: which option, what is wrong,
// and where the command's options are listed (its raw messages talk about
// positional arguments and '--' escapes).
export function argErrorMessage(error: { code?: string; message: string }, command: string): string {
  const help = `run 'switchyard ${command} --help' for its options`;
  const option = /'(-{1,2}[^' ]+)/.exec(error.message)?.[1];
  switch (error.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option ${option ?? ''}; ${help}`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return /argument missing/.test(error.message) ? `${option ?? 'an option'} needs a value; ${help}` : `${option ?? 'an option'} takes no value; ${help}`;
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL': {
      const given = /argument '([^']*)'/.exec(error.message)?.[1];
      return `unexpected argument${given !== undefined ? ` "${given.slice(0, 100)}"` : ''}: this command takes options only; ${help}`;
    }
    default:
      return `${error.message.split('\n')[0]}; ${help}`;
  }
}
