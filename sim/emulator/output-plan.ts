// What the emulated engine writes instead of filler when a request asks for
// a client feature vLLM supports: a tool call when tools are offered (vLLM's
// tool-call format), JSON matching a simple response_format schema, text cut
// at a stop string, and logprobs for each token. The plan is the output's
// tokens; the engine model still decides when each one comes.
import { randomUUID } from 'node:crypto';
import { fillerText } from './filler.ts';

type Body = Record<string, unknown>;

export interface ToolCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

export interface OutputPlan {
  /** The output's tokens (about 4 characters each). */
  readonly tokens: readonly string[];
  /** Ended by a stop string, and which one (vLLM's stop_reason). */
  readonly stopString: string | null;
  readonly toolCall?: ToolCall;
}

const CHARS_PER_TOKEN = 4;
const MAX_SCHEMA_DEPTH = 8;

/** Splits text into ~4-character tokens. */
export function tokensOf(text: string): string[] {
  const tokens: string[] = [];
  for (let i = 0; i < text.length; i += CHARS_PER_TOKEN) tokens.push(text.slice(i, i + CHARS_PER_TOKEN));
  return tokens.length > 0 ? tokens : [''];
}

/** A value that satisfies a simple JSON schema: types, properties, required, items, enum, const. */
export function valueFor(schema: unknown, depth = 0): unknown {
  const s = (schema ?? {}) as Body;
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  if (Array.isArray(s.anyOf) && s.anyOf.length > 0) return valueFor(s.anyOf[0], depth + 1);
  if (Array.isArray(s.oneOf) && s.oneOf.length > 0) return valueFor(s.oneOf[0], depth + 1);
  const type = Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
  if (depth > MAX_SCHEMA_DEPTH) return null;
  switch (type) {
    case 'string':
      return typeof s.minLength === 'number' && s.minLength > 10 ? 'x'.repeat(s.minLength) : 'the router';
    case 'integer':
      return typeof s.minimum === 'number' ? Math.ceil(s.minimum) : 1;
    case 'number':
      return typeof s.minimum === 'number' ? s.minimum : 0.5;
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array': {
      const count = Math.max(1, typeof s.minItems === 'number' ? Math.min(s.minItems, 16) : 1);
      return Array.from({ length: count }, () => valueFor(s.items, depth + 1));
    }
    default: {
      const out: Body = {};
      const properties = (s.properties ?? {}) as Record<string, unknown>;
      for (const [name, sub] of Object.entries(properties).slice(0, 64)) out[name] = valueFor(sub, depth + 1);
      if (Object.keys(properties).length === 0 && type !== 'object') out.answer = 'the router';
      return out;
    }
  }
}

/** The function a chat request's tools and tool_choice call, or undefined (no tools, "none", or the last turn is a tool's answer). */
function calledTool(body: Body): { name: string; parameters: unknown } | undefined {
  const tools = Array.isArray(body.tools)
    ? (body.tools as Body[]).filter((t) => t?.type === 'function' && t.function && typeof (t.function as Body).name === 'string')
    : [];
  if (tools.length === 0 || body.tool_choice === 'none') return undefined;
  const messages = body.messages as Body[] | undefined;
  // A tool loop ends: once a tool has answered, the model answers in words.
  if (body.tool_choice !== 'required' && typeof body.tool_choice !== 'object' && messages?.[messages.length - 1]?.role === 'tool') return undefined;
  const wanted =
    typeof body.tool_choice === 'object' && body.tool_choice !== null ? ((body.tool_choice as Body).function as Body | undefined)?.name : undefined;
  const tool = (tools.find((t) => (t.function as Body).name === wanted) ?? tools[0]).function as Body;
  return { name: tool.name as string, parameters: tool.parameters };
}

function stopStrings(body: Body): string[] {
  const stop = body.stop;
  if (typeof stop === 'string') return stop === '' ? [] : [stop];
  return Array.isArray(stop) ? stop.filter((s): s is string => typeof s === 'string' && s !== '').slice(0, 16) : [];
}

function schemaOf(body: Body): { schema: unknown } | undefined {
  const format = body.response_format as Body | undefined;
  if (format?.type === 'json_schema') return { schema: (format.json_schema as Body | undefined)?.schema };
  if (format?.type === 'json_object') return { schema: undefined };
  // The Responses API's text.format.
  const text = (body.text as Body | undefined)?.format as Body | undefined;
  if (text?.type === 'json_schema') return { schema: text.schema };
  return undefined;
}

/**
 * The output of a chat or completion request of at most `maxTokens` tokens,
 * or undefined for plain filler. `stops` adds stop strings (Anthropic's stop_sequences).
 */
export function planOutput(body: Body, maxTokens: number, stops: readonly string[] = []): OutputPlan | undefined {
  const tool = calledTool(body);
  if (tool) {
    const args = JSON.stringify(valueFor(tool.parameters));
    const call: ToolCall = { id: `chatcmpl-tool-${randomUUID().replaceAll('-', '')}`, type: 'function', function: { name: tool.name, arguments: args } };
    return { tokens: tokensOf(args).slice(0, maxTokens), stopString: null, toolCall: call };
  }
  const json = schemaOf(body);
  if (json) return { tokens: tokensOf(JSON.stringify(valueFor(json.schema))).slice(0, maxTokens), stopString: null };
  const all = [...stopStrings(body), ...stops];
  if (all.length === 0) return undefined;
  const text = fillerText(maxTokens);
  let cut = -1;
  let which: string | null = null;
  for (const stop of all) {
    const at = text.indexOf(stop);
    if (at >= 0 && (cut < 0 || at < cut)) [cut, which] = [at, stop];
  }
  if (cut < 0) return undefined;
  // vLLM leaves the stop string out of the text (include_stop_str_in_output is false by default).
  const kept = body.include_stop_str_in_output === true ? text.slice(0, cut + which!.length) : text.slice(0, cut);
  const words = kept.match(/ ?[^ ]+| +/g) ?? [''];
  return { tokens: words.length > 0 ? words : [''], stopString: which };
}

/** Chat logprobs (logprobs: true, top_logprobs: k) for the output's tokens, as vLLM reports them. */
export function chatLogprobs(tokens: readonly string[], top: number): { content: object[] } {
  return {
    content: tokens.map((token, i) => {
      const entry = (t: string, rank: number) => ({ token: t, logprob: -0.05 * (i % 7) - rank * 1.5, bytes: [...Buffer.from(t)] });
      return { ...entry(token, 0), top_logprobs: Array.from({ length: top }, (_, r) => entry(r === 0 ? token : `${token.trim()}${r}`, r)) };
    }),
  };
}

/** Completions logprobs (logprobs: k), as vLLM reports them. */
export function completionLogprobs(tokens: readonly string[], top: number): object {
  let offset = 0;
  return {
    text_offset: tokens.map((t) => ((offset += t.length), offset - t.length)),
    token_logprobs: tokens.map((_, i) => -0.05 * (i % 7)),
    tokens,
    top_logprobs: tokens.map((t, i) =>
      Object.fromEntries(Array.from({ length: Math.max(1, top) }, (_, r) => [r === 0 ? t : `${t.trim()}${r}`, -0.05 * (i % 7) - r * 1.5])),
    ),
  };
}
