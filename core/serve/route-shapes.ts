// What differs between the routed APIs, kept out of the proxy's path: how a
// route's errors look (OpenAI's or Anthropic's shape), what its body says
// about where it must go (a Responses API follow-up), and what is sent
// upstream (JSON with the model rewritten, a Responses request named after
// its replica, a multipart upload as it came).
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Admitted, DecideOptions } from '../decide/decide.ts';
import type { Rejection } from '../errors.ts';
import type { Generation } from '../decide/generation.ts';
import { anthropicErrorEvent, writeAnthropicRejection } from './anthropic-errors.ts';
import { RAW_BODY, replaceField, type MultipartBody } from './multipart-body.ts';
import { writeRejection } from './rejections.ts';
import { mintResponseId, readChain } from './response-ids.ts';
import { editedBody } from './upstream-body.ts';

type Body = Record<string, unknown>;

/** What a route reads from the body before deciding. */
export interface Prepared {
  readonly pinnedReplica?: DecideOptions['pinnedReplica'];
  /** A conversation the body names (the Responses API chain), when no header does. */
  readonly conversationId?: string;
  /** The chain's tag, carried into the next response id. */
  readonly chain?: string;
}

export interface RouteShape {
  writeError(res: ServerResponse, r: Rejection, requestId: string, extraHeaders?: Record<string, string>): void;
  /** How a stream that breaks after its first byte ends (default: OpenAI's error event). */
  readonly errorEvent?: (r: Rejection) => string;
  prepare?(body: Body, snapshot: Generation): Prepared;
  /** The upstream body of one attempt (default: the JSON with `model` rewritten, serialized once). */
  bodyFor?(body: Body, decision: Admitted, prepared: Prepared): string | Buffer;
  contentTypeOf?(body: Body): string | undefined;
}

export const NOTHING_PREPARED: Prepared = Object.freeze({});

export const OPENAI_ROUTE: RouteShape = { writeError: writeRejection };

export const ANTHROPIC_ROUTE: RouteShape = { writeError: writeAnthropicRejection, errorEvent: anthropicErrorEvent };

/**
 * /v1/responses: a follow-up goes to the replica its previous response names;
 * every response is named (vLLM's `request_id`) after the replica making it
 * and the conversation it continues (response-ids.ts).
 */
export const RESPONSES_ROUTE: RouteShape = {
  writeError: writeRejection,
  prepare(body, snapshot) {
    const previous = body.previous_response_id;
    if (typeof previous !== 'string') return NOTHING_PREPARED;
    const chain = readChain(snapshot, previous);
    if (!chain) return NOTHING_PREPARED;
    return {
      pinnedReplica: { id: chain.replica ?? 'unknown to this policy', notFound: chain.notFound },
      conversationId: `resp-${chain.conversation}`,
      chain: chain.conversation,
    };
  },
  bodyFor(body, decision, prepared) {
    return editedBody(body, {
      set: [
        ['model', decision.value.upstreamModel],
        ['request_id', mintResponseId(decision.value.replica, prepared.chain)],
      ],
    });
  },
};

/** /v1/audio/*: the form goes upstream as it came, with its model field rewritten when the decision changed it. */
export const MULTIPART_ROUTE: RouteShape = {
  writeError: writeRejection,
  bodyFor(body, decision) {
    const raw = (body as MultipartBody)[RAW_BODY];
    const { upstreamModel } = decision.value;
    return body.model === upstreamModel ? raw.bytes : replaceField(raw.bytes, raw.contentType, 'model', upstreamModel);
  },
  contentTypeOf: (body) => (body as MultipartBody)[RAW_BODY].contentType,
};

/** traceparent and tracestate as the client sent them (bounded), for the engine. */
export function clientTraceHeaders(headers: IncomingHttpHeaders): Record<string, string> | undefined {
  const parent = headers.traceparent;
  if (typeof parent !== 'string' || parent.length > 128) return undefined;
  const state = headers.tracestate;
  return typeof state === 'string' && state.length <= 512 ? { traceparent: parent, tracestate: state } : { traceparent: parent };
}
