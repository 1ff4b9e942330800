// The body sent to the engine: the client's, with what the router must add.
// Serialized once per engine kind and reused by every attempt:
// - `model`: the adapter or model id the decision chose;
// - `priority`, when the pool forwards priorities to engines that schedule by
//   them: vLLM (--scheduling-policy priority) runs lower values first, so it
//   gets -priority; SGLang (--enable-priority-scheduling) gets it as is;
// - `stream_options.include_usage`, on a stream the quota settles on usage
//   (docs/quotas.md); the extra chunk is removed again for a client that did
//   not ask for it (usage-tap.ts).
import type { Engine } from '../../sdk/index.ts';

export interface UpstreamBodyOptions {
  readonly upstreamModel: string;
  /** The request's integer priority, when the pool forwards it. */
  readonly priority?: number;
  /** Ask the engine for a usage chunk at the end of the stream. */
  readonly injectUsage: boolean;
}

export class UpstreamBody {
  private readonly texts = new Map<Engine | undefined, string>();

  constructor(
    private readonly body: Record<string, unknown>,
    private readonly options: UpstreamBodyOptions,
  ) {}

  for(engine: Engine | undefined): string {
    const key = this.options.priority === undefined ? undefined : engine;
    let text = this.texts.get(key);
    if (text === undefined) {
      text = JSON.stringify(this.build(engine));
      this.texts.set(key, text);
    }
    return text;
  }

  private build(engine: Engine | undefined): Record<string, unknown> {
    const { body, options } = this;
    if (body.model === options.upstreamModel && options.priority === undefined && !options.injectUsage) return body; // the common case: no copy
    const out: Record<string, unknown> = { ...body, model: options.upstreamModel };
    if (options.priority !== undefined) out.priority = engine === 'sglang' ? options.priority : 0 - options.priority;
    if (options.injectUsage) out.stream_options = { ...(body.stream_options as object | undefined), include_usage: true };
    return out;
  }
}

/** Whether the client itself asked for the usage chunk of a stream. */
export function clientAskedUsage(body: Record<string, unknown>): boolean {
  const options = body.stream_options as { include_usage?: unknown } | null | undefined;
  return options?.include_usage === true;
}
