// Synthetic traffic from a workload spec: Poisson or bursty gamma arrivals,
// conversations whose prompts grow turn by turn, shared system prompts with
// Zipf popularity, tenants, an adapter mix and a fraction of long-context
// requests. A prompt is described by the ids of its 16-token blocks: shared
// system-prompt blocks first, then blocks of its own (its conversation's).
import { mixHashes, seededRandom, type Priority } from '../../sdk/index.ts';
import { sharedThenOwn } from './block-runs.ts';
import { AZURE_CONVERSATION, gamma, sampler, WeightedChoice, ZipfSampler, type Random, type Sampler } from './distributions.ts';
import type { AdapterMixSpec, WorkloadSpec } from './load.ts';
import { BLOCK_TOKENS, type RequestSource, type SessionState, type SimRequestSpec } from './types.ts';

/** A workload tenant entry with its API key resolved against the policy. */
export interface ResolvedTenant {
  readonly apiKeyHash?: string;
  readonly weight: number;
  readonly model?: string;
  readonly batchFraction?: number;
  readonly adapters?: AdapterMixSpec;
}

/** What a request with code says (code_fraction): enough for the router's code detection. */
export const CODE_SNIPPET = 'Why does this fail?\n```python\ndef total(items):\n    return sum(i.price for i in items)\n```';

/** The least a user message adds to a system prompt, in tokens. */
const MIN_USER_TOKENS = BLOCK_TOKENS;

class AdapterMix {
  readonly fraction: number;
  readonly names: readonly string[];
  private readonly popularity: ZipfSampler;

  constructor(spec: AdapterMixSpec) {
    this.fraction = spec.fraction ?? 1;
    this.names = spec.names ?? Array.from({ length: spec.count ?? 1 }, (_, i) => `${spec.prefix ?? 'adapter-'}${i}`);
    this.popularity = new ZipfSampler(this.names.length, spec.zipf ?? 0);
  }

  pick(random: Random): string | undefined {
    if (this.fraction < 1 && random() >= this.fraction) return undefined;
    return this.names[this.popularity.sample(random)];
  }
}

/** Every adapter name a workload may send (for checking against the policy). */
export function adapterNames(mix: AdapterMixSpec): string[] {
  return [...new AdapterMix(mix).names];
}

export class SyntheticSource implements RequestSource {
  private readonly spec: WorkloadSpec;
  // Independent streams: arrivals, lengths, conversations, mixes.
  private readonly rArrival: Random;
  private readonly rLength: Random;
  private readonly rSession: Random;
  private readonly rMix: Random;
  /** Its own stream, drawn only when code_fraction > 0: workloads without code keep their draws. */
  private readonly rCode: Random;
  private readonly salt: number;

  private readonly prompt: Sampler;
  private readonly output: Sampler;
  private readonly turns?: Sampler;
  private readonly think?: Sampler;
  private readonly followUpTokens?: Sampler;
  private readonly longPrompt?: Sampler;
  private readonly longOutput?: Sampler;

  private readonly models: WeightedChoice<string>;
  private readonly tenants: WeightedChoice<number>;
  private readonly tenantList: readonly ResolvedTenant[];
  private readonly tenantAdapters: (AdapterMix | undefined)[];
  private readonly systemPopularity?: ZipfSampler;
  private readonly systemTokens: Int32Array;
  private readonly systemBases: Float64Array;

  private readonly limit: number;
  private readonly endMs: number;
  private readonly rate0: number;
  private readonly rate1: number;
  private readonly turnsFactor: number;

  private clock = 0;
  private issued = 0;
  private sessions = 0;
  private singles = 0;

  constructor(spec: WorkloadSpec, seed: number | string, tenants: readonly ResolvedTenant[]) {
    this.spec = spec;
    this.rArrival = seededRandom(`${seed}:arrivals`);
    this.rLength = seededRandom(`${seed}:lengths`);
    this.rSession = seededRandom(`${seed}:sessions`);
    this.rMix = seededRandom(`${seed}:mix`);
    this.rCode = seededRandom(`${seed}:code`);
    this.salt = seededRandom(`${seed}:blocks`)() * 0x1_0000_0000;

    this.prompt = sampler(spec.prompt_tokens ?? AZURE_CONVERSATION.prompt, true);
    this.output = sampler(spec.output_tokens ?? AZURE_CONVERSATION.output, true);
    const sessions = spec.sessions;
    if (sessions && (sessions.fraction ?? 1) > 0) {
      this.turns = sampler(sessions.turns ?? { type: 'geometric', mean: 4 }, true);
      this.think = sampler(sessions.think_time_s ?? { type: 'exponential', mean: 5 }, false);
      this.followUpTokens = sampler(sessions.follow_up_tokens ?? { type: 'lognormal', median: 150, p99: 1200 }, true);
    }
    if (spec.long_context && spec.long_context.fraction > 0) {
      this.longPrompt = sampler(spec.long_context.prompt_tokens ?? 65_536, true);
      this.longOutput = spec.long_context.output_tokens !== undefined ? sampler(spec.long_context.output_tokens, true) : this.output;
    }

    const models = spec.models ?? [{ name: spec.model ?? 'chat-small', weight: 1 }];
    this.models = new WeightedChoice(
      models.map((m) => m.name),
      models.map((m) => m.weight ?? 1),
    );
    this.tenantList = tenants.length ? tenants : [{ weight: 1 }];
    this.tenants = new WeightedChoice(
      this.tenantList.map((_, i) => i),
      this.tenantList.map((t) => t.weight),
    );
    const shared = spec.adapters ? new AdapterMix(spec.adapters) : undefined;
    this.tenantAdapters = this.tenantList.map((t) => (t.adapters ? new AdapterMix(t.adapters) : shared));

    const system = spec.system_prompts;
    const count = system && (system.fraction ?? 1) > 0 ? system.count : 0;
    this.systemTokens = new Int32Array(count);
    this.systemBases = new Float64Array(count);
    if (system && count > 0) {
      this.systemPopularity = new ZipfSampler(count, system.zipf ?? 1);
      const lengths = sampler(system.tokens ?? 512, true);
      const r = seededRandom(`${seed}:system-prompts`);
      for (let i = 0; i < count; i++) {
        this.systemTokens[i] = lengths.sample(r);
        this.systemBases[i] = mixHashes(this.salt, 0x5_0000 + i);
      }
    }

    this.limit = spec.requests ?? Infinity;
    this.endMs = spec.duration_s !== undefined ? spec.duration_s * 1000 : Infinity;
    this.rate0 = spec.arrivals!.rate;
    this.rate1 = spec.arrivals!.rate_end ?? this.rate0;
    // `rate` counts follow-up turns too: conversations start less often.
    const sessionShare = this.turns ? (sessions!.fraction ?? 1) * (1 - (this.longPrompt ? spec.long_context!.fraction : 0)) : 0;
    this.turnsFactor = 1 - sessionShare + sessionShare * (this.turns?.mean ?? 1);
  }

  next(): SimRequestSpec | undefined {
    if (this.issued >= this.limit) return undefined;
    const at = this.clock + this.gapMs();
    if (at > this.endMs) return undefined;
    this.clock = at;
    this.issued++;
    return this.newArrival(at);
  }

  followUp(previous: SimRequestSpec, finishedAt: number): SimRequestSpec | undefined {
    const session = previous.session;
    if (!session || session.turnsLeft <= 0 || this.issued >= this.limit) return undefined;
    const prompt = previous.promptTokens + previous.outputTokens + this.followUpTokens!.sample(this.rSession);
    const at = finishedAt + this.think!.sample(this.rSession) * 1000;
    const max = this.spec.sessions?.max_context_tokens ?? 16_000;
    if (prompt > max || at > this.endMs) return undefined;
    session.turnsLeft--;
    this.issued++;
    const turn = previous.turn + 1;
    return this.request(
      at,
      session.model,
      session.apiKeyHash,
      session.priority,
      prompt,
      this.outputOf(this.output),
      session.systemBase,
      session.systemBlocks,
      session.blockBase,
      'standard',
      turn,
      2 * turn,
      session,
    );
  }

  close(): void {}

  private gapMs(): number {
    let rate = this.rate0;
    if (this.rate1 !== this.rate0) rate += ((this.rate1 - this.rate0) * Math.min(this.clock, this.endMs)) / this.endMs;
    rate /= this.turnsFactor;
    const arrivals = this.spec.arrivals!;
    if (arrivals.process === 'gamma' && arrivals.cv !== undefined && arrivals.cv !== 1) {
      const shape = 1 / (arrivals.cv * arrivals.cv);
      return (gamma(shape, this.rArrival) / shape / rate) * 1000;
    }
    return (-Math.log(1 - this.rArrival()) / rate) * 1000;
  }

  private newArrival(at: number): SimRequestSpec {
    const r = this.rMix;
    const tenantIndex = this.tenants.pick(r);
    const tenant = this.tenantList[tenantIndex];
    const batchFraction = tenant.batchFraction ?? this.spec.batch_fraction ?? 0;
    const priority: Priority | undefined = batchFraction > 0 && r() < batchFraction ? 'batch' : undefined;

    if (this.longPrompt && r() < this.spec.long_context!.fraction) {
      const model = tenant.model ?? this.models.pick(r);
      const base = mixHashes(this.salt, 0x4000_0000 + this.singles++);
      return this.request(
        at,
        model,
        tenant.apiKeyHash,
        priority,
        this.longPrompt.sample(this.rLength),
        this.outputOf(this.longOutput!),
        0,
        0,
        base,
        'long-context',
        1,
        1,
      );
    }

    const adapter = this.tenantAdapters[tenantIndex]?.pick(r);
    const model = adapter ?? tenant.model ?? this.models.pick(r);
    let systemBase = 0;
    let systemTokens = 0;
    const system = this.spec.system_prompts;
    if (this.systemPopularity && ((system!.fraction ?? 1) >= 1 || r() < system!.fraction!)) {
      const i = this.systemPopularity.sample(r);
      systemBase = this.systemBases[i];
      systemTokens = this.systemTokens[i];
    }
    const systemBlocks = Math.floor(systemTokens / BLOCK_TOKENS);
    let prompt = this.prompt.sample(this.rLength);
    if (prompt < systemTokens + MIN_USER_TOKENS) prompt = systemTokens + MIN_USER_TOKENS;
    const messages = systemTokens > 0 ? 2 : 1;

    if (this.turns && ((this.spec.sessions!.fraction ?? 1) >= 1 || r() < this.spec.sessions!.fraction!)) {
      const id = this.sessions++;
      const session: SessionState = {
        id,
        conversationId: this.spec.sessions!.conversation_id === false ? undefined : `conv-${id}`,
        blockBase: mixHashes(this.salt, id),
        systemBase,
        systemBlocks,
        model,
        apiKeyHash: tenant.apiKeyHash,
        priority,
        tenantIndex,
        turnsLeft: this.turns.sample(this.rSession) - 1,
      };
      return this.request(
        at,
        model,
        tenant.apiKeyHash,
        priority,
        prompt,
        this.outputOf(this.output),
        systemBase,
        systemBlocks,
        session.blockBase,
        'standard',
        1,
        messages,
        session,
      );
    }
    const base = mixHashes(this.salt, 0x4000_0000 + this.singles++);
    return this.request(at, model, tenant.apiKeyHash, priority, prompt, this.outputOf(this.output), systemBase, systemBlocks, base, 'standard', 1, messages);
  }

  private outputOf(dist: Sampler): number {
    const n = dist.sample(this.rLength);
    const cap = this.spec.max_tokens;
    return cap !== undefined && n > cap ? cap : n;
  }

  private request(
    at: number,
    model: string,
    apiKeyHash: string | undefined,
    priority: Priority | undefined,
    promptTokens: number,
    outputTokens: number,
    systemBase: number,
    systemBlocks: number,
    blockBase: number,
    klass: string,
    turn: number,
    messageCount: number,
    session?: SessionState,
  ): SimRequestSpec {
    const full = Math.floor(promptTokens / BLOCK_TOKENS);
    const shared = systemBlocks < full ? systemBlocks : full;
    const blocks = sharedThenOwn(systemBase, shared, blockBase, full);
    const codeFraction = this.spec.code_fraction ?? 0;
    // The answer's blocks continue the request's own run: the next turn's prompt does the same.
    const sequenceBlocks = sharedThenOwn(systemBase, shared, blockBase, Math.floor((promptTokens + outputTokens) / BLOCK_TOKENS));
    return {
      at,
      model,
      apiKeyHash,
      conversationId: session?.conversationId,
      priority,
      deadlineMs: this.spec.deadline_ms,
      promptTokens,
      outputTokens,
      maxTokens: this.spec.max_tokens ?? outputTokens,
      messageCount,
      text: codeFraction > 0 && this.rCode() < codeFraction ? CODE_SNIPPET : undefined,
      blocks,
      sequenceBlocks,
      klass,
      turn,
      session,
    };
  }
}
