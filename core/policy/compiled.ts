// The compiled policy: what the policy files say, checked, resolved and
// frozen, as plain data. Compiling needs nothing but the files and the
// strategy registry: no clock, seed, logger or KV index, and it creates no
// strategy instance. The decision runtime (core/decide/generation.ts) builds a
// generation from it, holding the strategy instances, candidate caches and
// pick budgets; nothing here is ever mutated (docs/design.md, "From policy
// files to a generation").
import type { OutlierSettings } from '../fleet/outlier.ts';
import type { Candidate, Engine, LoadScoreWeights, Priority, StrategyDefinition } from '../../sdk/index.ts';
import type { TokenEstimator } from '../facts/tokens.ts';
import type { TokenWeights } from '../quota/cost.ts';
import type { RuleSet } from '../rules/compile.ts';

export interface ModelVersion {
  readonly version: string;
  readonly weight: number;
  readonly canary: boolean;
}

export interface ModelEntry {
  readonly id: string;
  readonly versions: readonly ModelVersion[];
  readonly totalWeight: number;
  /** Present for a cold-tier model: not deployed, loaded on demand. */
  readonly cold?: { readonly loadHook: string; readonly retryAfterS: number };
  /**
   * The tokenizer folder (absolute path) that counts this model's prompts,
   * or ENGINE_TOKENIZER (`tokenizer: engine`: a replica counts them); undefined: estimated (docs/tokens.md).
   */
  readonly tokenizer?: string;
  /** The model that takes this one's requests when all its pools refuse for capacity (validated loop-free, deployed). */
  readonly fallback?: string;
}

export interface CascadeEntry {
  readonly name: string;
  readonly defaultModel: string;
  readonly rules: RuleSet<string>;
  /**
   * Every model the cascade can answer with: the default first, then the
   * rules' targets in evaluation order. A tenant that may not use the default
   * gets the first of these it may use.
   */
  readonly models: readonly string[];
}

export type AliasEntry =
  | { readonly name: string; readonly model: string; readonly cascade?: undefined }
  | { readonly name: string; readonly cascade: CascadeEntry; readonly model?: undefined };

export interface TenantAdapter {
  readonly name: string;
  readonly model: string;
  readonly isDefault: boolean;
}

export interface TenantSpec {
  readonly id: string;
  readonly tier: string;
  /** Model ids the tenant may use; undefined means all. */
  readonly allowedModels?: ReadonlySet<string>;
  readonly adapters: ReadonlyMap<string, TenantAdapter>;
  /** Base model id → the adapter applied to this tenant's requests for it. */
  readonly defaultAdapters: ReadonlyMap<string, string>;
  readonly quotas: TenantQuotas;
  /** The class of defaultPriorityLevel (what strategies and the `priority` rule fact see). */
  readonly defaultPriority: Priority;
  /** The integer priority of requests without x-priority (core/facts/priority.ts). */
  readonly defaultPriorityLevel: number;
  /** x-priority above this is lowered to it. */
  readonly maxPriority: number;
  /** Overrides RouterSettings.decisionHeaders for this tenant. */
  readonly decisionHeaders?: DecisionHeaders;
}

export interface TenantQuotas {
  readonly requestsPerMinute?: number;
  readonly tokensPerMinute?: number;
  /** Counted and reported, never refused. */
  readonly shadow: boolean;
  /** What each kind of token costs against tokensPerMinute. */
  readonly weights: TokenWeights;
}

/** minimal: x-request-id and the model served; full: also pool, replica, strategy reason, adapter, policy generation, retried. */
export type DecisionHeaders = 'minimal' | 'full';

export interface ReplicaSpec {
  readonly id: string;
  readonly url: string;
  readonly engine: Engine;
  readonly adapters: readonly string[];
  readonly maxLoras: number;
  readonly maxNumSeqs: number;
  readonly maxQueue: number;
  readonly draining: boolean;
  /** Derived when compiled: the capacity strategies see. */
  readonly capacity: Candidate['capacity'];
  /** The engine's KV cache event endpoint (ZeroMQ PUB), when it publishes them. */
  readonly kvEvents?: string;
  readonly kvEventsTopic: string;
  /** The engine's KV event replay endpoint (ZeroMQ ROUTER), to recover missed batches. */
  readonly kvEventsReplay?: string;
  /**
   * The engine's API key, read from the environment variable api_key_env
   * names when the policy is compiled. Not enumerable: it never appears when
   * a spec is printed or serialized.
   */
  readonly apiKey?: string;
}

/** A strategy of a pool's chain as the policy names it: checked, not created. */
export interface StrategySpec {
  readonly name: string;
  /** How messages name it: `strategy "name"`, with the plugin's file when it is one. */
  readonly label: string;
  readonly definition: StrategyDefinition<unknown>;
  /** Checked against the plugin's config schema. */
  readonly config: unknown;
  /** Identifies the slot across reloads, for handing state over: pool key, position and name. */
  readonly slotKey: string;
  /** Where the policy names it: a create() that throws is reported there. */
  readonly at: { readonly file: string; readonly line: number; readonly col: number };
}

/** Timeouts and connections towards a pool's engines (docs/reliability.md gives the defaults' reasons). */
export interface UpstreamSettings {
  readonly connectTimeoutMs: number;
  /** Time to response headers on a stream (engines send them at once). */
  readonly streamHeadersTimeoutMs: number;
  /** Time to response headers without streaming: the whole generation. */
  readonly headersTimeoutMs: number;
  /** Longest silence between two chunks of a stream. */
  readonly streamIdleTimeoutMs: number;
  /** Longest silence between two chunks of a non-streaming body. */
  readonly bodyTimeoutMs: number;
  readonly connections: number;
}

/** Retries before the first byte (docs/reliability.md). */
export interface RetrySettings {
  /** Retries after the first attempt, each on another replica. */
  readonly maxRetries: number;
  /** Retries in progress may be at most this share of the pool's requests in flight... */
  readonly budgetPercent: number;
  /** ...or this many, whichever is more. */
  readonly minConcurrency: number;
}

export interface PoolSpec {
  /** model@version/name: unique across the policy. */
  readonly key: string;
  readonly name: string;
  readonly model: string;
  readonly version: string;
  readonly maxModelLen?: number;
  readonly replicas: readonly ReplicaSpec[];
  /** The chain, in order: created by the runtime for each generation. */
  readonly strategies: readonly StrategySpec[];
  readonly saturation: { readonly kvUsage: number; readonly queueDepth: number };
  readonly capacity: { readonly queueDepth: number; readonly retryAfterS: number };
  /** Who is refused first as the pool fills (core/decide/shed.ts). */
  readonly shedding: SheddingSettings;
  /** Send the request's priority in the engine's `priority` body field. */
  readonly forwardPriority: boolean;
  /** Load in tokens: prefill tokens in flight that count as a full replica (tokenLoad 1). */
  readonly tokenLoad: { readonly fullPrefillTokens: number };
  /** The pool of the same version taking what this one would refuse for capacity (checked loop-free when compiled). */
  readonly overflow?: string;
  readonly weights: LoadScoreWeights;
  readonly waitEstimate: { readonly baseMs: number; readonly msPerQueuedRequest: number; readonly prefillMsPer1kTokens: number };
  readonly upstream: UpstreamSettings;
  readonly retries: RetrySettings;
  readonly outlier: OutlierSettings;
}

export interface RouterSettings {
  readonly maxStalenessMs: number;
  readonly scrapeIntervalMs: number;
  readonly healthIntervalMs: number;
  readonly charsPerToken: number;
  /** How long a request waits for its prompt's token count before it goes on with the estimate (docs/tokens.md). */
  readonly tokenizeWaitMs: number;
  /** The same for a model whose replicas publish KV events: their lookups need the prompt's token ids (docs/tokens.md). */
  readonly kvTokenizeWaitMs: number;
  readonly defaultMaxTokens: number;
  readonly prefixBlockChars: number;
  readonly prefixMaxBlocks: number;
  readonly bodyLimitBytes: number;
  /** What API clients see of a decision in response headers. */
  readonly decisionHeaders: DecisionHeaders;
  // What a client connection may send and hold (docs/reliability.md). Read when serve starts.
  readonly maxHeaderBytes: number;
  readonly maxJsonDepth: number;
  readonly maxJsonValues: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxConnections: number;
  /** A client that reads nothing of its response for this long loses it, and the engine request is aborted. */
  readonly sendTimeoutMs: number;
  /** Floods (docs/reliability.md): open connections per client address, unanswered requests per connection, requests per second per connection. */
  readonly maxConnectionsPerClient: number;
  readonly maxPipelinedRequests: number;
  readonly maxRequestsPerConnectionPerSecond: number;
  /** Bodies larger than largeBodyBytes being received at once, per client address and per tenant. */
  readonly largeBodyBytes: number;
  readonly maxLargeBodiesPerClient: number;
  readonly maxLargeBodiesPerTenant: number;
  /** Absolute paths. */
  readonly pluginDirs: readonly string[];
  /** Derived from charsPerToken when compiled. */
  readonly estimator: TokenEstimator;
  /** Shared quotas (docs/quotas.md); read when the router starts. */
  readonly quotaStore: QuotaStoreSettings;
  /** x-priority names → integer priorities (interactive 0 and batch -1 unless moved). */
  readonly priorityNames: ReadonlyMap<string, number>;
  /** Request headers naming a conversation, lower case, the first present wins. */
  readonly conversationHeaders: readonly string[];
  /** Largest multipart audio upload (/v1/audio/*). Read when serve starts. */
  readonly audioBodyLimitBytes: number;
}

export interface QuotaStoreSettings {
  readonly redisUrl?: string;
  readonly keyPrefix: string;
  readonly timeoutMs: number;
  readonly onUnavailable: 'fail_open' | 'fail_closed';
  readonly expectedRouters: number;
  readonly leaseFraction: number;
  readonly leaseIdleMs: number;
}

export interface CompiledPolicy {
  /** Content hash of every policy file: equal hashes, equal policies. */
  readonly hash: string;
  readonly files: readonly string[];
  readonly models: ReadonlyMap<string, ModelEntry>;
  readonly aliases: ReadonlyMap<string, AliasEntry>;
  /** Adapter name → its base model; which tenants may use it is on the tenant. */
  readonly adapters: ReadonlyMap<string, string>;
  readonly tenantsByKeyHash: ReadonlyMap<string, TenantSpec>;
  readonly tenantsById: ReadonlyMap<string, TenantSpec>;
  readonly anonymousTenant?: TenantSpec;
  /** In policy order. */
  readonly pools: readonly PoolSpec[];
  readonly replicas: ReadonlyMap<string, ReplicaSpec>;
  readonly poolRules: { readonly defaultPool: string; readonly rules: RuleSet<string> };
  readonly settings: RouterSettings;
}

export const versionKey = (model: string, version: string) => `${model}@${version}`;

/** The pool's shedding curve: p = min(saturation^exponent · scale · |priority|, 1) for priority < 0 (core/decide/shed.ts). */
export interface SheddingSettings {
  readonly mode: 'probabilistic' | 'off';
  readonly exponent: number;
  readonly scale: number;
}

/** llm-d's admitter: min(sat^5 · 300, 1) for priority -1 (about 10% at 0.2, 73% at 0.3, all from 0.32). */
export const SHEDDING_DEFAULTS: SheddingSettings = Object.freeze({ mode: 'probabilistic', exponent: 5, scale: 300 });

/** Prompt tokens in prefill that count as a full replica in `tokenLoad` unless the pool says (token_load.full_prefill_tokens). */
export const DEFAULT_FULL_PREFILL_TOKENS = 65_536;

/** A replica's capacity as strategies see it: it changes only with the policy. */
export function replicaCapacity(spec: Pick<ReplicaSpec, 'maxLoras' | 'maxNumSeqs' | 'maxQueue'>): Candidate['capacity'] {
  return Object.freeze({ maxLoras: spec.maxLoras, maxBatch: spec.maxNumSeqs, maxQueue: spec.maxQueue });
}
