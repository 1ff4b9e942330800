// Policy files for the shadow and replay tests: a tiny model served by a
// general pool and a long-context pool. The live policy sends everything to
// general; the candidate sends long prompts (over 100 tokens) to long.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FULL_HEADERS_SETTINGS, OPEN_TENANTS, TINY_MODELS } from '../helpers/router.ts';

const pools = (strategies: string) => `kind: pools
pools:
  - name: general
    model: tiny
    version: v1
    limits: { max_model_len: 4096 }
    strategies: ${strategies}
    replicas:
      - { id: g0, url: "emulate://tiny" }
      - { id: g1, url: "emulate://tiny" }
      - { id: g2, url: "emulate://tiny" }
  - name: long
    model: tiny
    version: v1
    limits: { max_model_len: 4096 }
    strategies: ${strategies}
    replicas:
      - { id: l0, url: "emulate://tiny" }
      - { id: l1, url: "emulate://tiny" }
`;

const LIVE_RULES = 'kind: rules\npool_rules:\n  default_pool: general\n  rules: []\n';
const LONG_RULES = `kind: rules
pool_rules:
  default_pool: general
  rules:
    - name: long prompts
      conditions:
        all:
          - { fact: promptTokens, operator: greaterThan, value: 100 }
      event: { type: route-pool, params: { pool: long } }
`;

export function livePolicyFiles(strategies = '[session-affinity, least-load]'): Record<string, string> {
  return {
    'models.yaml': TINY_MODELS,
    'tenants.yaml': OPEN_TENANTS,
    'pools.yaml': pools(strategies),
    'rules.yaml': LIVE_RULES,
    'settings.yaml': FULL_HEADERS_SETTINGS,
  };
}

export function longPromptPolicyFiles(strategies = '[session-affinity, least-load]'): Record<string, string> {
  return { ...livePolicyFiles(strategies), 'rules.yaml': LONG_RULES };
}

export function writePolicyDir(files: Record<string, string>, name = 'policy'): string {
  const dir = mkdtempSync(join(tmpdir(), `switchyard-${name}-`));
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  return dir;
}

/** A prompt of about `tokens` estimated tokens (4 characters a token). */
export const promptOf = (tokens: number, word = 'cache') =>
  Array.from({ length: Math.ceil((tokens * 4) / (word.length + 1)) }, (_, i) => `${word}${i % 10}`).join(' ');
