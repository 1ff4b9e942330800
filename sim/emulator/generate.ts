// Carries one HTTP generation request through the engine model: one engine
// request per prompt, tokens streamed as SSE chunks as the engine's steps
// produce them (or gathered into one body), and the engine request cancelled
// when the client goes away, so its KV blocks are freed as vLLM frees them.
import type { FastifyReply } from 'fastify';
import type { Clock } from '../clock.ts';
import type { EngineModel } from '../engine/engine-model.ts';
import type { PromptBlocks } from '../engine/prompt-blocks.ts';
import type { EngineResult } from '../engine/types.ts';
import { EmulatorError } from './errors.ts';
import { fillerText, fillerToken } from './filler.ts';
import type { GenerationKind } from './parse-request.ts';
import { DONE_CHUNK, fullResponse, roleChunk, tokenChunk, usage, usageChunk, type ResponseHead, type Usage } from './responses.ts';

export interface PromptJob {
  readonly promptTokens: number;
  readonly blocks: PromptBlocks;
  readonly maxTokens: number;
  readonly finishReason: 'stop' | 'length';
  /** The answer's first word without its leading space: a tokenized chat answer starts a turn (see prompt.ts answerTokenIds). */
  readonly trimFirst?: boolean;
  /** The text of each output token when it is not filler (structured output, tool calls, a stop string): maxTokens of them. */
  readonly output?: readonly string[];
}

/** One choice as it ended: its text and why. */
export interface ChoiceOutcome {
  readonly text: string;
  readonly finishReason: EngineResult['finishReason'];
  readonly outputTokens: number;
}

/**
 * The wire format of an API other than chat and completions (the Responses
 * API, Anthropic Messages): its stream events and its body. Chat and
 * completions keep their own, in responses.ts.
 */
export interface ApiFormat {
  /** Written once the stream's headers are out. */
  open(): string;
  token(choice: number, index: number, text: string, finishReason: 'stop' | 'length' | null): string;
  /** The stream's last events, once every choice has finished. */
  close(outcomes: readonly ChoiceOutcome[], totals: Usage): string;
  body(outcomes: readonly ChoiceOutcome[], totals: Usage): object;
}

export interface GenerationJob {
  readonly kind: GenerationKind;
  readonly head: ResponseHead;
  readonly adapter: string | undefined;
  readonly prompts: readonly PromptJob[];
  readonly stream: boolean;
  readonly includeUsage: boolean;
  readonly format?: ApiFormat;
  /** Each choice's body fields beyond text (tool calls, logprobs), for chat and completions. */
  readonly decorate?: (choice: number, outcome: ChoiceOutcome) => Record<string, unknown>;
}

export interface GenerationObserver {
  /** Time to first token of one prompt, in model milliseconds. */
  firstToken(ttftMs: number): void;
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' };

/**
 * Resolves with the response body (non-streaming), or with undefined once
 * the stream is written or the client has gone.
 */
export function generate(
  engine: EngineModel,
  clock: Clock,
  job: GenerationJob,
  reply: FastifyReply,
  observer: GenerationObserver,
): Promise<object | undefined> {
  const raw = reply.raw;
  const { kind, head } = job;
  const count = job.prompts.length;
  const ids = job.prompts.map((_, i) => (count === 1 ? head.id : `${head.id}-${i}`));
  const results: (EngineResult | undefined)[] = new Array(count).fill(undefined);
  const arrivedAt = clock.now();
  let unfinished = count;
  let clientGone = false;
  let failed = false;

  return new Promise((resolve, reject) => {
    if (raw.destroyed) {
      // Gone before the engine saw it: nothing to generate, nobody to answer.
      reply.hijack();
      resolve(undefined);
      return;
    }
    // reply.raw, not request.raw: the request's 'close' fires once its body is read.
    const onClose = (): void => {
      if (raw.writableFinished) return;
      clientGone = true;
      for (let i = 0; i < count; i++) if (!results[i]) engine.cancel(ids[i]);
    };
    raw.on('close', onClose);

    const writable = (): boolean => !clientGone && !raw.destroyed && !raw.writableEnded;

    const finishAll = (): void => {
      raw.off('close', onClose);
      const done = results as EngineResult[];
      const aborted = done.some((r) => r.finishReason === 'abort');
      const totals = usage(
        done.reduce((sum, r) => sum + r.promptTokens, 0),
        done.reduce((sum, r) => sum + r.outputTokens, 0),
        done.reduce((sum, r) => sum + r.cachedTokens, 0),
      );
      const outcomes = (): ChoiceOutcome[] =>
        done.map((r, i) => ({
          text:
            job.prompts[i].output?.slice(0, r.outputTokens).join('') ??
            (job.prompts[i].trimFirst ? fillerText(r.outputTokens).trimStart() : fillerText(r.outputTokens)),
          finishReason: r.finishReason,
          outputTokens: r.outputTokens,
        }));
      if (job.stream) {
        if (writable()) {
          if (!aborted && job.format) raw.write(job.format.close(outcomes(), totals));
          else if (!aborted) {
            if (job.includeUsage) raw.write(usageChunk(kind, head, totals));
            raw.write(DONE_CHUNK);
          }
          raw.end();
        }
        resolve(undefined);
      } else if (clientGone) {
        reply.hijack();
        resolve(undefined);
      } else if (aborted) {
        reject(new EmulatorError('ServiceUnavailableError', 'the engine stopped before the request finished'));
      } else if (job.format) {
        resolve(job.format.body(outcomes(), totals));
      } else {
        resolve(
          fullResponse(
            kind,
            head,
            outcomes().map((o, i) => ({ text: o.text, finishReason: o.finishReason, extra: job.decorate?.(i, o) })),
            totals,
          ),
        );
      }
    };

    if (job.stream) {
      reply.hijack();
      raw.writeHead(200, SSE_HEADERS);
      if (job.format) raw.write(job.format.open());
      else raw.flushHeaders();
    }

    try {
      job.prompts.forEach((prompt, i) => {
        const last = prompt.maxTokens - 1;
        engine.submit({
          id: ids[i],
          promptTokens: prompt.promptTokens,
          maxTokens: prompt.maxTokens,
          blocks: prompt.blocks,
          adapter: job.adapter,
          finishReason: prompt.finishReason,
          onFirstToken: (t) => observer.firstToken(t - arrivedAt),
          onToken: job.stream
            ? (index) => {
                if (!writable()) return;
                const text = prompt.output?.[index] ?? (index === 0 && prompt.trimFirst ? fillerToken(0).trimStart() : fillerToken(index));
                const finish = index === last ? prompt.finishReason : null;
                if (job.format) return void raw.write(job.format.token(i, index, text, finish));
                if (kind === 'chat' && index === 0) raw.write(roleChunk(head, i));
                raw.write(tokenChunk(kind, head, i, text, finish));
              }
            : undefined,
          onFinish: (result) => {
            if (failed) return;
            results[i] = result;
            if (--unfinished === 0) finishAll();
          },
        });
      });
    } catch (error) {
      failed = true;
      raw.off('close', onClose);
      for (const id of ids) engine.cancel(id);
      if (job.stream) raw.destroy();
      reject(error);
    }
  });
}
