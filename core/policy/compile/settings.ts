// Router settings (kind: settings): at most one document; defaults otherwise.
import { dirname, resolve } from 'node:path';
import { charsPerTokenEstimator } from '../../facts/tokens.ts';
import type { RouterSettings } from '../snapshot.ts';
import type { CompileContext } from './context.ts';

const SETTINGS_DEFAULTS: RouterSettings = {
  maxStalenessMs: 5000,
  scrapeIntervalMs: 1000,
  healthIntervalMs: 1000,
  charsPerToken: 4,
  defaultMaxTokens: 256,
  prefixBlockChars: 64,
  prefixMaxBlocks: 256,
  bodyLimitBytes: 8 * 1024 * 1024,
  pluginDirs: [],
  estimator: charsPerTokenEstimator(4),
};

export function compileSettings(ctx: CompileContext): RouterSettings {
  const docs = ctx.ofKind('settings');
  for (const extra of docs.slice(1)) ctx.report(extra.source, ['kind'], `a second settings document (the first is ${docs[0].source.file})`);
  if (docs.length === 0) return SETTINGS_DEFAULTS;
  const { source, doc } = docs[0];
  const base = dirname(source.file);
  return {
    maxStalenessMs: doc.max_staleness_ms,
    scrapeIntervalMs: doc.scrape_interval_ms,
    healthIntervalMs: doc.health_interval_ms,
    charsPerToken: doc.chars_per_token,
    defaultMaxTokens: doc.default_max_tokens,
    prefixBlockChars: doc.prefix_block_chars,
    prefixMaxBlocks: doc.prefix_max_blocks,
    bodyLimitBytes: doc.body_limit_bytes,
    pluginDirs: doc.plugin_dirs.map((dir: string) => resolve(base, dir)),
    estimator: charsPerTokenEstimator(doc.chars_per_token),
  };
}
