// `switchyard emulate`: an OpenAI-compatible HTTP server that behaves like one
// vLLM (or SGLang) replica, its timing, batching, KV cache and metrics driven
// by the engine model on real time run `speed` times faster.
import { randomUUID } from 'node:crypto';
import { Transform } from 'node:stream';
import Fastify, { type FastifyError, type FastifyReply } from 'fastify';
import { EngineModel } from '../engine/engine-model.ts';
import { KvEventRecorder } from '../engine/kv-events.ts';
import { getProfile, type EngineProfile } from '../engine/profiles.ts';
import { embeddingResponse } from './embeddings.ts';
import { EmulatorError, badRequest, errorBody } from './errors.ts';
import { generate, type PromptJob } from './generate.ts';
import { KvEventPublisher } from './kv-publisher.ts';
import { EngineExporter, type EngineKind } from './metrics.ts';
import { chatInput, parseChatBody, parseCompletionBody, parseEmbeddingBody, parseLoraBody, type GenerationSpec } from './parse-request.ts';
import { EngineTokenizer } from './engine-tokenizer.ts';
import { answerTokenIds, estimateTokens, sequenceBlocks, tokenBlocks } from './prompt.ts';
import { tokenizeRoutes } from './tokenize-routes.ts';
import { VllmBlockHasher } from './vllm-block-hash.ts';
import { chatLogprobs, completionLogprobs, planOutput, type OutputPlan } from './output-plan.ts';
import { messagesFormat, parseMessagesBody, parseResponsesBody, promptOf, ResponseStore, responseNotFound, responsesFormat } from './responses-api.ts';
import { registerPoolingRoutes } from './pooling.ts';
import { fillerText } from './filler.ts';
import type { ApiFormat, ChoiceOutcome } from './generate.ts';
import { responseId, toolCallStream, type ResponseHead } from './responses.ts';
import { scaledClock } from './scaled-clock.ts';
import { ServedModels } from './served-models.ts';

export interface EmulatorOptions {
  /** 0 (the default) picks a free port. */
  readonly port?: number;
  readonly host?: string;
  /** A profile name from sim/engine/profiles.ts, or a profile of your own. */
  readonly profile: string | EngineProfile;
  readonly engine?: EngineKind;
  /** 10 runs the profile's timing ten times faster. */
  readonly speed?: number;
  /** The model path reported as `root` in /v1/models; the profile's model by default. */
  readonly modelName?: string;
  /** The name clients put in `model` and metrics carry in model_name; modelName by default. */
  readonly servedModelName?: string;
  /** LoRA adapters registered at start and loaded into GPU slots (up to max_loras). */
  readonly adapters?: readonly string[];
  /** More adapters registered at start (vLLM's --lora-modules) but loaded only when a request needs one. */
  readonly registeredAdapters?: readonly string[];
  /** Overrides the profile's max_loras. */
  readonly maxLoras?: number;
  /** Overrides the profile's max_num_seqs. */
  readonly maxNumSeqs?: number;
  /** Output length when a request sets no max_tokens (it then ends with finish_reason "stop"). */
  readonly defaultMaxTokens?: number;
  /** Publish KV cache events on this ZeroMQ endpoint (tcp://127.0.0.1:5557; port * picks one), as vLLM's --kv-events-config. */
  readonly kvEvents?: string;
  /** The events' topic (vLLM's kv-events-config topic). Default "kv-events". */
  readonly kvEventsTopic?: string;
  /** Serve buffered batches again on this ZeroMQ endpoint (vLLM's kv-events-config replay_endpoint). */
  readonly kvEventsReplay?: string;
  /** The model's Hugging Face tokenizer folder: prompts are tokenized and blocks cached as vLLM does. */
  readonly tokenizer?: string;
  /** Seeds the block hashes (vLLM's PYTHONHASHSEED); random per process without it. */
  readonly kvHashSeed?: string;
  /** How events carry block hashes: 'int' (the last 8 bytes, vLLM's default) or 'bytes' (the digest). */
  readonly kvHashForm?: 'int' | 'bytes';
  /**
   * Longer prompts are counted ~4 characters a token instead of tokenized.
   * An emulate:// replica runs in the router's process, where encoding a
   * 200 KB prompt would stall the router's event loop: the embedded fleet
   * sets this; `switchyard emulate` (a process of its own) does not.
   */
  readonly tokenizeLimitChars?: number;
  /** Require this key on /v1 routes (vLLM's --api-key): others get a 401. */
  readonly apiKey?: string;
  /** Called with every request body's bytes as they arrived (tests check what a router forwarded, byte for byte). */
  readonly onBody?: (path: string, bytes: Buffer) => void;
}

interface ApiOptions {
  /** Another API's wire format (Responses, Messages), made once the prompt is known. */
  readonly format?: (head: ResponseHead, promptTokens: number, plan: OutputPlan | undefined) => ApiFormat;
  /** Stop strings besides the body's `stop` (Anthropic's stop_sequences). */
  readonly stops?: readonly string[];
}

/** A choice's fields beyond its text: tool calls, logprobs and the stop string, as vLLM fills them. */
function decorator(spec: GenerationSpec, plans: readonly (OutputPlan | undefined)[]) {
  const body = spec.body;
  return (i: number, outcome: ChoiceOutcome): Record<string, unknown> => {
    const plan = plans[i];
    const extra: Record<string, unknown> = {};
    if (plan?.toolCall && spec.kind === 'chat') {
      extra.message = { role: 'assistant', content: null, tool_calls: [plan.toolCall] };
      extra.finish_reason = 'tool_calls';
    }
    if (plan?.stopString) extra.stop_reason = plan.stopString;
    const tokens =
      plan?.tokens.slice(0, outcome.outputTokens) ?? Array.from({ length: outcome.outputTokens }, (_, t) => fillerText(t + 1).slice(fillerText(t).length));
    if (spec.kind === 'chat' && body.logprobs === true)
      extra.logprobs = chatLogprobs(tokens, typeof body.top_logprobs === 'number' ? Math.min(body.top_logprobs, 20) : 0);
    if (spec.kind === 'completion' && typeof body.logprobs === 'number') extra.logprobs = completionLogprobs(tokens, Math.min(body.logprobs, 20));
    return extra;
  };
}

/** completions with echo and max_tokens 0: the prompt back, nothing generated. */
function echoResponse(spec: GenerationSpec, model: string): object {
  const promptTokens = spec.prompts.reduce((sum, p) => sum + estimateTokens(p), 0);
  return {
    id: responseId('completion', randomUUID().replaceAll('-', '')),
    object: 'text_completion',
    created: Math.floor(Date.now() / 1000),
    model: spec.model ?? model,
    choices: spec.prompts.map((text, index) => ({ index, text, logprobs: null, finish_reason: 'length', stop_reason: null, prompt_logprobs: null })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens, completion_tokens: 0, prompt_tokens_details: null },
  };
}

export interface Emulator {
  readonly url: string;
  readonly port: number;
  readonly engine: EngineModel;
  /** Where KV cache events are published (the bound endpoint), when they are. */
  readonly kvEvents?: string;
  readonly kvEventsReplay?: string;
  /** Makes GET /health answer 200 (true) or 503 (false); generation is unaffected. */
  setHealthy(ok: boolean): void;
  close(): Promise<void>;
}

const DEFAULT_MAX_TOKENS = 128;
const VLLM_VERSION = '0.8.5';

export async function startEmulator(options: EmulatorOptions): Promise<Emulator> {
  const baseProfile = typeof options.profile === 'string' ? getProfile(options.profile) : options.profile;
  const profile: EngineProfile = {
    ...baseProfile,
    maxLoras: options.maxLoras ?? baseProfile.maxLoras,
    maxNumSeqs: options.maxNumSeqs ?? baseProfile.maxNumSeqs,
  };
  const kind: EngineKind = options.engine ?? 'vllm';
  if (kind !== 'vllm' && kind !== 'sglang') throw new Error(`unknown engine '${String(kind)}' (known: vllm, sglang)`);
  const host = options.host ?? '127.0.0.1';
  const modelPath = options.modelName ?? profile.modelName;
  const servedName = options.servedModelName ?? modelPath;
  const defaultMaxTokens = options.defaultMaxTokens ?? DEFAULT_MAX_TOKENS;
  const clock = scaledClock(options.speed ?? 1);
  const adapters = options.adapters ?? [];
  const engine = new EngineModel(profile, clock, { preloadAdapters: adapters });
  const models = new ServedModels({ servedModelName: servedName, modelPath, maxModelLen: profile.maxModelLen, ownedBy: kind });
  for (const adapter of new Set([...adapters, ...(options.registeredAdapters ?? [])])) models.register(adapter, `/adapters/${adapter}`);
  const exporter = new EngineExporter(kind, servedName, engine);
  const tokenizer = options.tokenizer === undefined ? undefined : await EngineTokenizer.load(options.tokenizer);
  const hasher = new VllmBlockHasher(options.kvHashSeed, options.kvHashForm);
  let publisher: KvEventPublisher | undefined;
  if (options.kvEvents !== undefined) {
    publisher = await KvEventPublisher.bind(options.kvEvents, options.kvEventsTopic ?? 'kv-events', profile.blockSize, options.kvEventsReplay);
    engine.setKvListener(new KvEventRecorder(publisher.record.bind(publisher)));
  }
  let healthy = true;

  // Like vLLM (Python's json), a key named __proto__ is an ordinary key (a tool schema may have such a property).
  const app = Fastify({
    logger: false,
    bodyLimit: 64 * 1024 * 1024,
    forceCloseConnections: true,
    onProtoPoisoning: 'ignore',
    onConstructorPoisoning: 'ignore',
  });

  const onBody = options.onBody;
  if (onBody) {
    app.addHook('preParsing', async (request, _reply, payload) => {
      const chunks: Buffer[] = [];
      return payload.pipe(
        new Transform({
          transform(chunk: Buffer, _encoding, callback) {
            chunks.push(chunk);
            callback(null, chunk);
          },
          flush(callback) {
            onBody(request.url, Buffer.concat(chunks));
            callback();
          },
        }),
      );
    });
  }

  app.setErrorHandler((error: FastifyError, _request, reply) => {
    if (reply.raw.headersSent) {
      reply.raw.destroy();
      return;
    }
    if (error instanceof EmulatorError) return reply.code(error.status).send(error.toBody());
    const status = error.statusCode ?? 500;
    // Fastify's own 4xx errors (malformed JSON, wrong content type, body too large) in vLLM's shape.
    if (status >= 400 && status < 500) return reply.code(status).send(errorBody('BadRequestError', error.message, status));
    return reply.code(500).send(errorBody('InternalServerError', error.message || 'internal error', 500));
  });
  // FastAPI's answer for a route that does not exist.
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ detail: 'Not Found' }));

  const runGeneration = (spec: GenerationSpec, reply: FastifyReply, api: ApiOptions = {}): Promise<object | undefined> | object => {
    const adapter = models.resolve(spec.model);
    if (spec.echoOnly) return echoResponse(spec, servedName);
    const chat = spec.kind === 'chat';
    const plans: (OutputPlan | undefined)[] = [];
    const prompts = spec.prompts
      .flatMap((text) => Array<string>(spec.n).fill(text))
      .map((text): PromptJob => {
        let ids: number[] | undefined;
        if (tokenizer && text.length <= (options.tokenizeLimitChars ?? Infinity)) {
          try {
            ids = chat && spec.chat ? tokenizer.encodeChat(spec.chat) : tokenizer.encode(text, true);
          } catch (error) {
            throw badRequest(`the chat template failed to render: ${String((error as Error).message).slice(0, 300)}`, 'messages');
          }
        }
        const promptTokens = ids ? ids.length : estimateTokens(text);
        const requested = spec.maxTokens ?? 1;
        if (promptTokens + requested > profile.maxModelLen) {
          throw badRequest(
            `This model's maximum context length is ${profile.maxModelLen} tokens. However, you requested ${promptTokens + requested} tokens ` +
              `(${promptTokens} in the messages, ${requested} in the completion). Please reduce the length of the messages or completion.`,
            spec.kind === 'chat' ? 'messages' : 'prompt',
          );
        }
        const limit = spec.maxTokens ?? Math.min(defaultMaxTokens, profile.maxModelLen - promptTokens);
        const plan = planOutput(spec.body, limit, api.stops);
        plans.push(plan);
        const maxTokens = plan ? plan.tokens.length : limit;
        // The whole sequence the engine will hold: the prompt, then the answer it generates (vLLM caches both).
        const blocks = ids
          ? tokenBlocks([...ids, ...answerTokenIds(tokenizer!, maxTokens, chat)], profile.blockSize, hasher, adapter)
          : sequenceBlocks(text, maxTokens, hasher, adapter, chat);
        return {
          promptTokens,
          blocks,
          maxTokens,
          // Planned output that fits ends as the model chose to end it; filler runs to max_tokens when one was set.
          finishReason: plan
            ? plan.stopString !== null || plan.toolCall || maxTokens < limit
              ? 'stop'
              : 'length'
            : spec.maxTokens === undefined
              ? 'stop'
              : 'length',
          trimFirst: ids !== undefined && chat,
          output: plan?.tokens,
        };
      });
    const head = {
      id: responseId(spec.kind, randomUUID().replaceAll('-', '')),
      created: Math.floor(Date.now() / 1000),
      model: spec.model ?? servedName,
    };
    const call = plans[0]?.toolCall;
    const format =
      api.format?.(head, prompts[0].promptTokens, plans[0]) ??
      (call && spec.stream && spec.kind === 'chat' ? toolCallStream(head, call, spec.includeUsage) : undefined);
    const job = { kind: spec.kind, head, adapter, prompts, stream: spec.stream, includeUsage: spec.includeUsage, format, decorate: decorator(spec, plans) };
    return generate(engine, clock, job, reply, { firstToken: (ms) => exporter.ttft.observe(ms / 1000) });
  };

  // vLLM's --api-key guards the /v1 routes; /health, /metrics, /tokenize and the rest stay open.
  if (options.apiKey !== undefined) {
    const expected = `Bearer ${options.apiKey}`;
    app.addHook('onRequest', async (request, reply) => {
      if (request.url.startsWith('/v1') && request.headers.authorization !== expected) return reply.code(401).send({ error: 'Unauthorized' });
    });
  }

  app.post('/v1/chat/completions', async (request, reply) => runGeneration(parseChatBody(request.body), reply));

  /** A Responses or Messages request, run as the chat it amounts to. */
  const chatGeneration = (
    spec: { model?: string; messages: Parameters<typeof promptOf>[0]; maxTokens: GenerationSpec['maxTokens']; stream: boolean },
    body: Record<string, unknown>,
  ): GenerationSpec => ({
    kind: 'chat',
    model: spec.model,
    prompts: [promptOf(spec.messages)],
    chat: chatInput(body, spec.messages),
    maxTokens: spec.maxTokens,
    stream: spec.stream,
    includeUsage: false,
    n: 1,
    body,
  });

  const stored = new ResponseStore();
  app.post('/v1/responses', async (request, reply) => {
    const spec = parseResponsesBody(request.body, stored);
    const model = spec.model ?? servedName;
    const generation = chatGeneration(spec, request.body as Record<string, unknown>);
    return runGeneration(generation, reply, { format: () => responsesFormat(spec, model, stored) });
  });
  app.get('/v1/responses/:id', async (request) => {
    const id = (request.params as { id: string }).id;
    const entry = stored.get(id);
    if (!entry) throw responseNotFound(id);
    return entry.response;
  });
  app.post('/v1/messages', async (request, reply) => {
    const spec = parseMessagesBody(request.body);
    const model = spec.model ?? servedName;
    const generation = chatGeneration(spec, request.body as Record<string, unknown>);
    return runGeneration(generation, reply, {
      stops: spec.stopSequences,
      format: (_head, promptTokens, plan) => messagesFormat(model, plan?.stopString ?? null, promptTokens),
    });
  });
  registerPoolingRoutes(app, models, servedName);
  app.post('/v1/completions', async (request, reply) => runGeneration(parseCompletionBody(request.body), reply));

  app.post('/v1/embeddings', async (request) => {
    const spec = parseEmbeddingBody(request.body);
    models.resolve(spec.model);
    return embeddingResponse(`embd-${randomUUID().replaceAll('-', '')}`, spec.model ?? servedName, spec.inputs, spec.encoding);
  });

  app.get('/v1/models', async () => models.list());

  tokenizeRoutes(app, { tokenizer, maxModelLen: profile.maxModelLen, resolveModel: (model) => models.resolve(model) });

  app.post('/v1/load_lora_adapter', async (request, reply) => {
    const { name, path } = parseLoraBody(request.body, true);
    models.register(name, path!);
    return reply.type('text/plain; charset=utf-8').send(`Success: LoRA adapter '${name}' added successfully.`);
  });

  app.post('/v1/unload_lora_adapter', async (request, reply) => {
    const { name } = parseLoraBody(request.body, false);
    models.unregister(name);
    // Running requests keep the adapter; an idle one leaves its GPU slot now.
    engine.evictAdapter(name);
    return reply.type('text/plain; charset=utf-8').send(`Success: LoRA adapter '${name}' removed successfully.`);
  });

  app.get('/health', async (_request, reply) => reply.code(healthy ? 200 : 503).send());

  app.get('/metrics', async (_request, reply) => reply.type('text/plain; version=0.0.4; charset=utf-8').send(exporter.render()));

  app.get('/version', async () => ({ version: VLLM_VERSION }));

  try {
    await app.listen({ port: options.port ?? 0, host });
  } catch (error) {
    engine.stop();
    publisher?.close();
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : (options.port ?? 0);
  const urlHost = host.includes(':') ? `[${host}]` : host;

  return {
    url: `http://${urlHost}:${port}`,
    port,
    engine,
    kvEvents: publisher?.endpoint,
    kvEventsReplay: publisher?.replayEndpoint,
    setHealthy(ok) {
      healthy = ok;
    },
    async close() {
      // Ends every stream first, so closing the server does not wait on them.
      engine.stop();
      await app.close();
      publisher?.close();
    },
  };
}
