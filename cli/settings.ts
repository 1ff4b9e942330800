// Command-line settings that may also come from the environment (containers
// and platforms configure through env; PORT is what Heroku-style platforms
// set). One table per command drives parsing, precedence and --help, so the
// help text cannot drift from what is read. A flag wins over the environment,
// the environment over the default.
import { UsageError } from './usage.ts';

export interface Setting {
  /** The flag's name without dashes. */
  readonly flag: string;
  /** Environment variables, first set one wins. */
  readonly env: readonly string[];
  readonly default?: string;
  /** Shown in --help after the flag. */
  readonly arg: string;
  readonly help: string;
  /** A boolean switch rather than a value. */
  readonly boolean?: boolean;
}

export type SettingValues = Record<string, string | undefined>;

/** Options for node:util parseArgs: no defaults there, so a missing flag can fall back to env. */
export function parseArgsOptions(settings: readonly Setting[]): Record<string, { type: 'string' | 'boolean' }> {
  return Object.fromEntries(settings.map((s) => [s.flag, { type: s.boolean ? ('boolean' as const) : ('string' as const) }]));
}

/** Each setting's value: flag, else the first environment variable set (non-empty), else the default. */
export function resolveSettings(settings: readonly Setting[], flags: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): SettingValues {
  const out: SettingValues = {};
  for (const s of settings) {
    const given = flags[s.flag];
    if (given !== undefined) {
      out[s.flag] = String(given);
      continue;
    }
    const fromEnv = s.env.map((name) => env[name]).find((v) => v !== undefined && v !== '');
    out[s.flag] = fromEnv ?? s.default;
  }
  return out;
}

/** The help lines for a table of settings: flag, env and default side by side. */
export function settingsHelp(settings: readonly Setting[]): string {
  const left = settings.map((s) => `  --${s.flag}${s.arg ? ` ${s.arg}` : ''}`);
  const width = Math.max(...left.map((l) => l.length)) + 2;
  return settings
    .map((s, i) => {
      const def = s.default !== undefined ? ` (default ${s.default})` : '';
      const env = s.env.length ? `  [env ${s.env.join(', ')}]` : '';
      return `${left[i].padEnd(width)}${s.help}${def}${env}`;
    })
    .join('\n');
}

/** A port number (0 picks a free one); the setting named in the error. */
export function portSetting(name: string, value: string | undefined): number {
  const n = value !== undefined && /^\d{1,5}$/.test(value) ? Number(value) : NaN;
  if (!(n >= 0 && n <= 65535)) throw new UsageError(`--${name} must be a port number from 0 to 65535, not "${value}"`);
  return n;
}

/** A number above zero. */
export function positiveSetting(name: string, value: string | undefined): number {
  const n = value !== undefined && value.trim() !== '' ? Number(value) : NaN;
  if (!(n > 0) || !Number.isFinite(n)) throw new UsageError(`--${name} must be a positive number, not "${value}"`);
  return n;
}
