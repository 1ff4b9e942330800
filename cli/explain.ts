// `switchyard explain`: where would this request go, and why? Runs the same
// decide() as the router, on a request file and optional fleet load.
import { parseArgs } from 'node:util';
import { chosen, decisionJson, type Decision } from '../core/decide/decide.ts';
import { endpointOf, explainCounted } from '../core/decide/explain.ts';
import { TokenizerService } from '../core/tokens/service.ts';
import { createEnv } from '../core/decide/env.ts';
import type { StepTrace } from '../core/decide/trace.ts';
import type { Endpoint } from '../core/facts/request-schemas.ts';
import { EMPTY_FLEET } from '../core/fleet/types.ts';
import { loadSnapshot } from '../core/decide/load.ts';
import { readFleetFile } from './fleet-file.ts';
import { readDataFile } from './data-file.ts';
import { UsageError } from './usage.ts';
import { formatProblem } from '../core/diagnostics/problem.ts';
import { BUILTIN_STRATEGIES } from '../plugins/index.ts';
import { PROFILE_NAMES } from '../sim/engine/profiles.ts';

const HELP = `Usage: switchyard explain [--policies DIR] --request FILE [--header 'Name: value']... [--fleet FILE] [--json] [--seed N]

  --policies DIR   policy directory (default: policies/)
  --request FILE   an OpenAI request body (JSON or YAML; - for stdin): messages → chat, prompt → completions, input → embeddings
  --header H       a request header, e.g. 'Authorization: Bearer sk-demo-premium' or 'x-conversation-id: c-42'
  --fleet FILE     replica load: replicas: { ID: { kv_usage, queue_depth, running, in_flight, health, loaded_adapters, age_ms } }
  --json           one JSON object: model, version, adapter, pool, replica, reason, status, retryAfter, trace, facts (promptTokens and promptTokensSource)
  --seed N         seeds the strategies' random choices (default 1)`;

export async function runExplain(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      policies: { type: 'string', default: 'policies' },
      request: { type: 'string' },
      header: { type: 'string', multiple: true, default: [] },
      fleet: { type: 'string' },
      json: { type: 'boolean', default: false },
      seed: { type: 'string', default: '1' },
      endpoint: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  if (!values.request) throw new UsageError('--request FILE is required (an OpenAI request body)');

  const loaded = await loadSnapshot(values.policies!, { builtins: BUILTIN_STRATEGIES, seed: values.seed, emulatedProfiles: PROFILE_NAMES });
  if (!loaded.snapshot) {
    for (const problem of loaded.problems) console.error(formatProblem(problem));
    console.error(`explain: the policies in ${values.policies} are invalid; run 'switchyard validate ${values.policies}'`);
    return 1;
  }
  const snapshot = loaded.snapshot;

  const body = readDataFile(values.request, 'request body');
  const headers: Record<string, string> = {};
  for (const h of values.header!) {
    const colon = h.indexOf(':');
    if (colon <= 0) throw new UsageError(`--header "${h}" is not 'Name: value'`);
    headers[h.slice(0, colon).trim().toLowerCase()] = h.slice(colon + 1).trim();
  }
  const endpoint = (values.endpoint ?? endpointOf(body)) as Endpoint;
  if (!['chat', 'completions', 'embeddings'].includes(endpoint)) throw new UsageError(`--endpoint must be chat, completions or embeddings`);

  const now = Date.now();
  const fleet = values.fleet ? readFleetFile(values.fleet, now, snapshot.replicas.keys()) : EMPTY_FLEET;
  const { decision, facts } = await explainCounted({ body, headers, endpoint }, snapshot, fleet, createEnv({ seed: values.seed, now: () => now }));
  await TokenizerService.shared().close();

  if (values.json) console.log(JSON.stringify({ ...decisionJson(decision), ...(facts ? { facts } : {}) }, null, 2));
  else console.log(renderText(decision, endpoint, body, facts));
  return 0;
}

const PATHS: Record<string, string> = { chat: '/v1/chat/completions', completions: '/v1/completions', embeddings: '/v1/embeddings' };

function renderText(d: Decision, endpoint: string, body: unknown, facts?: Record<string, unknown>): string {
  const lines: string[] = [];
  const requested = (body as { model?: unknown } | null)?.model;
  lines.push(`POST ${PATHS[endpoint]}  model=${JSON.stringify(requested)}  tenant=${chosen(d).tenant ?? '-'}`);
  if (facts)
    lines.push(
      `prompt     ${facts.promptTokens} tokens (${facts.promptTokensSource === 'estimate' ? `estimated${facts.promptTokensFallback ? `: ${facts.promptTokensFallback}` : ''}` : `counted by the ${facts.promptTokensSource}`})`,
    );
  if (d.ok) {
    const v = d.value;
    lines.push(`→ 200 admitted: ${v.model}@${v.version}${v.adapter ? ` + adapter ${v.adapter}` : ''} · pool ${v.pool} · replica ${v.replica}`);
  } else {
    const r = d.rejection;
    const { action } = d.known;
    lines.push(`→ ${r.status} ${r.code}${r.retryAfterS !== undefined ? ` (Retry-After: ${r.retryAfterS})` : ''}: ${r.message}`);
    if (action) lines.push(`  action: ${action.type} ${action.model} via ${action.url}`);
  }
  lines.push('');
  const steps: [string, StepTrace | undefined][] = [
    ['tenant', d.trace.tenant],
    ['1 model', d.trace.model],
    ['2 pool', d.trace.pool],
    ['3 replica', d.trace.replica],
    ['4 admit', d.trace.admit],
  ];
  for (const [label, step] of steps) {
    if (!step) continue;
    lines.push(`${label.padEnd(10)} ${step.decidedBy}`);
    lines.push(`${''.padEnd(10)} ${step.reason}`);
    if (step.facts)
      lines.push(
        `${''.padEnd(10)} facts: ${Object.entries(step.facts)
          .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
          .join(' ')}`,
      );
    for (const alt of step.alternatives ?? []) {
      lines.push(`${''.padEnd(12)}· ${alt.name}${alt.score !== undefined ? ` ${Number(alt.score.toFixed(3))}` : ''}${alt.note ? `  ${alt.note}` : ''}`);
    }
  }
  return lines.join('\n');
}
