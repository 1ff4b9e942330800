// Router settings (kind: settings): at most one document; defaults otherwise.
import { dirname, resolve } from 'node:path';
import { DEFAULT_PRIORITY_NAMES } from '../../facts/priority.ts';
import { DEFAULT_KV_TOKENIZE_WAIT_MS, DEFAULT_TOKENIZE_WAIT_MS } from '../../tokens/defaults.ts';
import { characterClassEstimator } from '../../tokens/estimate.ts';
import { DEFAULT_CONVERSATION_HEADERS } from '../../facts/conversation.ts';
import type { QuotaStoreSettings, RouterSettings } from '../compiled.ts';
import type { CompileContext } from './context.ts';

const QUOTA_STORE_DEFAULTS: QuotaStoreSettings = {
  keyPrefix: 'switchyard:quota:',
  timeoutMs: 5,
  onUnavailable: 'fail_open',
  expectedRouters: 1,
  leaseFraction: 0.01,
  leaseIdleMs: 2000,
};

const SETTINGS_DEFAULTS: RouterSettings = {
  maxStalenessMs: 5000,
  scrapeIntervalMs: 1000,
  healthIntervalMs: 1000,
  charsPerToken: 4,
  tokenizeWaitMs: DEFAULT_TOKENIZE_WAIT_MS,
  kvTokenizeWaitMs: DEFAULT_KV_TOKENIZE_WAIT_MS,
  defaultMaxTokens: 256,
  prefixBlockChars: 64,
  prefixMaxBlocks: 256,
  bodyLimitBytes: 8 * 1024 * 1024,
  decisionHeaders: 'minimal',
  maxHeaderBytes: 16 * 1024,
  maxJsonDepth: 64,
  maxJsonValues: 500_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  keepAliveTimeoutMs: 72_000,
  maxConnections: 10_000,
  sendTimeoutMs: 30_000,
  maxConnectionsPerClient: 1000,
  maxPipelinedRequests: 16,
  maxRequestsPerConnectionPerSecond: 200,
  largeBodyBytes: 1024 * 1024,
  maxLargeBodiesPerClient: 4,
  maxLargeBodiesPerTenant: 32,
  pluginDirs: [],
  quotaStore: QUOTA_STORE_DEFAULTS,
  estimator: characterClassEstimator(4),
  priorityNames: DEFAULT_PRIORITY_NAMES,
  conversationHeaders: DEFAULT_CONVERSATION_HEADERS,
  audioBodyLimitBytes: 25 * 1024 * 1024,
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
    // One value when set; unset, models whose replicas publish KV events wait longer (docs/tokens.md).
    tokenizeWaitMs: doc.tokenize_wait_ms ?? SETTINGS_DEFAULTS.tokenizeWaitMs,
    kvTokenizeWaitMs: doc.tokenize_wait_ms ?? SETTINGS_DEFAULTS.kvTokenizeWaitMs,
    defaultMaxTokens: doc.default_max_tokens,
    prefixBlockChars: doc.prefix_block_chars,
    prefixMaxBlocks: doc.prefix_max_blocks,
    bodyLimitBytes: doc.body_limit_bytes,
    decisionHeaders: doc.decision_headers,
    maxHeaderBytes: doc.max_header_bytes,
    maxJsonDepth: doc.max_json_depth,
    maxJsonValues: doc.max_json_values,
    headersTimeoutMs: doc.headers_timeout_ms,
    requestTimeoutMs: doc.request_timeout_ms,
    keepAliveTimeoutMs: doc.keep_alive_timeout_ms,
    maxConnections: doc.max_connections,
    sendTimeoutMs: doc.send_timeout_ms,
    maxConnectionsPerClient: doc.max_connections_per_client,
    maxPipelinedRequests: doc.max_pipelined_requests,
    maxRequestsPerConnectionPerSecond: doc.max_requests_per_connection_per_second,
    largeBodyBytes: doc.large_body_bytes,
    maxLargeBodiesPerClient: doc.max_large_bodies_per_client,
    maxLargeBodiesPerTenant: doc.max_large_bodies_per_tenant,
    pluginDirs: doc.plugin_dirs.map((dir: string) => resolve(base, dir)),
    estimator: characterClassEstimator(doc.chars_per_token),
    quotaStore: quotaStoreSettings(doc.quota_store),
    priorityNames: doc.priority_names
      ? new Map([...DEFAULT_PRIORITY_NAMES, ...Object.entries(doc.priority_names as Record<string, number>)])
      : DEFAULT_PRIORITY_NAMES,
    conversationHeaders: doc.conversation_headers ? doc.conversation_headers.map((name: string) => name.toLowerCase()) : DEFAULT_CONVERSATION_HEADERS,
    audioBodyLimitBytes: doc.audio_body_limit_bytes ?? SETTINGS_DEFAULTS.audioBodyLimitBytes,
  };
}

function quotaStoreSettings(doc: Record<string, unknown> | undefined): QuotaStoreSettings {
  if (!doc) return QUOTA_STORE_DEFAULTS;
  const d = QUOTA_STORE_DEFAULTS;
  return {
    redisUrl: doc.redis_url as string | undefined,
    keyPrefix: (doc.key_prefix as string | undefined) ?? d.keyPrefix,
    timeoutMs: (doc.timeout_ms as number | undefined) ?? d.timeoutMs,
    onUnavailable: (doc.on_unavailable as QuotaStoreSettings['onUnavailable'] | undefined) ?? d.onUnavailable,
    expectedRouters: (doc.expected_routers as number | undefined) ?? d.expectedRouters,
    leaseFraction: (doc.lease_fraction as number | undefined) ?? d.leaseFraction,
    leaseIdleMs: (doc.lease_idle_ms as number | undefined) ?? d.leaseIdleMs,
  };
}
