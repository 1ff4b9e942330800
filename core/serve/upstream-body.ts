// The body sent to the engine: the client's bytes as received, with what the
// router must change spliced in (json-splice.ts; the parsed body serialized
// again only when the bytes are not at hand or the splice cannot be checked).
// Made once per engine kind and reused by every attempt:
// - `model`: the adapter or model id the decision chose;
// - `priority`, when the pool forwards priorities to engines that schedule by
//   them: vLLM (--scheduling-policy priority) runs lower values first, so it
//   gets -priority; SGLang (--enable-priority-scheduling) gets it as is;
// - `stream_options.include_usage`, on a stream the quota settles on usage
//   (docs/quotas.md); the extra chunk is removed again for a client that did
//   not ask for it (usage-tap.ts).
import type { Engine } from '../../sdk/index.ts';
import { rawJsonOf } from './json-body.ts';
import { spliceJson, type JsonEdits } from './json-splice.ts';

export interface UpstreamBodyOptions {
  readonly upstreamModel: string;
  /** The request's integer priority, when the pool forwards it. */
  readonly priority?: number;
  /** Ask the engine for a usage chunk at the end of the stream. */
  readonly injectUsage: boolean;
}

export class UpstreamBody {
  /** The first body built and its engine kind (undefined: any kind); a Map only once a retry goes to another kind. */
  private firstKey: Engine | undefined;
  private first: string | Buffer | undefined;
  private others: Map<Engine | undefined, string | Buffer> | undefined;

  constructor(
    private readonly body: Record<string, unknown>,
    private readonly options: UpstreamBodyOptions,
  ) {}

  for(engine: Engine | undefined): string | Buffer {
    const key = this.options.priority === undefined ? undefined : engine;
    if (this.first === undefined) {
      this.firstKey = key;
      return (this.first = this.build(engine));
    }
    if (key === this.firstKey) return this.first;
    let text = (this.others ??= new Map()).get(key);
    if (text === undefined) {
      text = this.build(engine);
      this.others.set(key, text);
    }
    return text;
  }

  private build(engine: Engine | undefined): string | Buffer {
    const { body, options } = this;
    const set: [string, unknown][] = [];
    if (body.model !== options.upstreamModel) set.push(['model', options.upstreamModel]);
    if (options.priority !== undefined) set.push(['priority', engine === 'sglang' ? options.priority : 0 - options.priority]);
    return editedBody(body, { set, merge: options.injectUsage ? ['stream_options', 'include_usage', true] : undefined });
  }
}

/**
 * `body` with `edits` made: on the client's bytes when the JSON parser kept
 * them (everything not edited goes out as it came), else serialized.
 */
export function editedBody(body: Record<string, unknown>, edits: JsonEdits): string | Buffer {
  const raw = rawJsonOf(body);
  const none = (edits.set ?? []).length === 0 && edits.merge === undefined;
  if (raw !== undefined && none) return raw; // the common case: nothing to scan
  if (raw !== undefined) {
    const spliced = spliceJson(raw, body, edits);
    if (spliced !== undefined) return spliced;
  }
  if (none) return JSON.stringify(body);
  const out: Record<string, unknown> = { ...body };
  for (const [key, value] of edits.set ?? []) out[key] = value;
  if (edits.merge) {
    const [key, member, value] = edits.merge;
    out[key] = { ...(body[key] as object | null | undefined), [member]: value };
  }
  return JSON.stringify(out);
}

/** Whether the client itself asked for the usage chunk of a stream. */
export function clientAskedUsage(body: Record<string, unknown>): boolean {
  const options = body.stream_options as { include_usage?: unknown } | null | undefined;
  return options?.include_usage === true;
}
