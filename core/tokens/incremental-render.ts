// A chat rendered message by message (docs/tokens.md, "Speed"), for
// templates whose shape core/tokens/template-loop.ts has proven: PRE's
// output, one loop-body output per message, POST's output. Each output is
// remembered in a chain keyed by everything it depends on (the request's
// template variables, the first message where PRE reads it, then each
// message in order), so a conversation's next turn renders only its new
// messages. Concatenated, the outputs are exactly the whole template's
// rendering: the loop body is evaluated as the interpreter evaluates it, in
// a scope holding what the interpreter's loop scope would hold.
import { Environment, Interpreter } from '@huggingface/jinja';
import { chatEnvironment, strftimeUtc, templateMessage, type ChatInput } from './chat-template.ts';
import type { ChatTemplateFolder } from './folder.ts';
import { RecentCache, type Slot } from './recent-cache.ts';
import { hashRange, hashString, mixHashes } from '../../sdk/hashing.ts';
import { contentSpliceable, spliceContent, spliceShape, type SpliceShape } from './content-splice.ts';
import { messageLoop, type JinjaNode, type MessageLoop } from './template-loop.ts';

/** One link of a rendered conversation: PRE (the root) or one message's loop output. */
export interface RenderLink {
  readonly id: number;
  readonly output: string;
  /** Ids of the rendering up to and including this link, up to a stable cut, and the text after the cut (set by the counter). */
  state?: { readonly ids: Uint32Array; readonly tail: string };
}

interface Root extends RenderLink {
  readonly env: Environment;
  /** Messages before the loop's first (the loop iterates `messages[offset:]`). */
  readonly offset: number;
  readonly post: string;
  /** A plain message's output shape per role and position (core/tokens/content-splice.ts); null: render it. */
  readonly shapes: Map<string, SpliceShape | null>;
  /** The first message's content where PRE reads a plain first message: its key holds only the fingerprint. */
  readonly firstContent?: string;
}

/** The chat's rendering as links: root (PRE), one per looped message, then POST's text. */
export interface RenderedChat {
  readonly links: readonly RenderLink[];
  readonly post: string;
}

interface Evaluator {
  evaluateBlock(statements: readonly JinjaNode[], environment: Environment): { value: string };
}

/**
 * A kept link, and for a plain message what its numeric key only hashes (its parent, role and content), compared in
 * full on a hit: two messages whose keys collide are never taken for each other.
 */
interface LinkEntry {
  readonly link: RenderLink;
  readonly parent?: number;
  readonly role?: string;
  readonly content?: string;
}

/** A `{role, content}` message with text content and no other field (most of a conversation), or undefined. */
function plainMessage(raw: unknown): { readonly role: string; readonly content: string } | undefined {
  const m = raw as { role?: unknown; content?: unknown } | null;
  if (m === null || typeof m !== 'object' || typeof m.role !== 'string' || typeof m.content !== 'string') return undefined;
  let fields = 0;
  for (const _ in m) fields++;
  return fields === 2 ? (m as { role: string; content: string }) : undefined;
}

/** A plain first message's role, length and both ends: its part of a root's key, its content compared in full on a hit. */
function plainFingerprint(plain: { readonly role: string; readonly content: string }): string {
  const c = plain.content;
  return `${plain.role}\u0000${c.length}\u0000${c.slice(0, 48)}\u0000${c.slice(-48)}`;
}

/** Characters of each end of a plain message's content its key hashes. */
const KEY_END_CHARS = 48;
/** 2^21: the second hash's bits below the first's, 53 bits in all (a Map key that is a number, no string made). */
const SECOND_HASH = 0x200000;

/**
 * A plain message's key under its parent link: the parent, the role, the content's length and both ends, hashed
 * where they are (a key string built, flattened and hashed per message per turn was a tenth of a next turn's count).
 * A collision only makes the older entry a miss: LinkCache.get compares the entry's parent, role and content in full.
 */
function plainKey(parent: number, role: string, content: string): number {
  const n = content.length;
  const head = hashRange(content, 0, Math.min(KEY_END_CHARS, n), parent);
  const tail = hashRange(content, Math.max(0, n - KEY_END_CHARS), n, hashString(role, n));
  return mixHashes(head, tail) * SECOND_HASH + (mixHashes(tail, head ^ parent) >>> 11);
}

/** Any other message's key under its parent link: all of its JSON. */
function jsonKey(parent: number, raw: unknown): string {
  return `${parent}\u0000${JSON.stringify(raw)}`;
}

/** Links, bounded in bytes, those not used lately dropped first (core/tokens/recent-cache.ts). */
class LinkCache {
  readonly #entries: RecentCache<LinkEntry, string | number>;
  /** Each kept link's slot: its cost grows when the counter gives it its ids. */
  readonly #slots = new WeakMap<RenderLink, Slot<LinkEntry>>();
  constructor(readonly maxBytes: number) {
    this.#entries = new RecentCache(maxBytes);
  }

  /** A plain message's link under `parent` (its key from plainKey). */
  getPlain(key: number, parent: number, role: string, content: string): RenderLink | undefined {
    const entry = this.#entries.get(key);
    return entry === undefined || entry.parent !== parent || entry.role !== role || entry.content !== content ? undefined : entry.link;
  }

  /** Any other message's link (its key from jsonKey, which holds all of it). */
  getJson(key: string): RenderLink | undefined {
    const entry = this.#entries.get(key);
    return entry === undefined || entry.content !== undefined ? undefined : entry.link;
  }

  /** Another message with the same key already kept: the newer one takes the key. */
  set(key: string | number, link: RenderLink, plain?: { readonly parent: number; readonly role: string; readonly content: string }): void {
    const keyBytes = typeof key === 'number' ? 8 : key.length * 2;
    const entry: LinkEntry = plain === undefined ? { link } : { link, parent: plain.parent, role: plain.role, content: plain.content };
    const slot = this.#entries.set(key, entry, keyBytes + (plain ? plain.content.length * 2 + plain.role.length * 2 : 0) + link.output.length * 2 + 96);
    if (slot !== undefined) this.#slots.set(link, slot);
  }

  /** Records a link's new state and its cost. */
  setState(link: RenderLink, state: NonNullable<RenderLink['state']>): void {
    const slot = this.#slots.get(link);
    if (slot === undefined || !slot.live) return; // evicted, or never kept: nobody finds it again
    const extra = state.ids.byteLength + state.tail.length * 2 - (link.state ? link.state.ids.byteLength + link.state.tail.length * 2 : 0);
    link.state = state;
    this.#entries.resize(slot, slot.cost + extra);
  }

  get bytes(): number {
    return this.#entries.bytes;
  }
}

const MAX_ROOTS = 64;
/** Shapes kept per root (role × position): past it, new ones are rendered. */
const MAX_SHAPES = 256;

export class IncrementalRenderer {
  readonly plan: MessageLoop;
  readonly #folder: ChatTemplateFolder;
  readonly #interpreter: Evaluator;
  readonly #roots = new Map<string, Root>();
  readonly links: LinkCache;
  #nextId = 1;
  /** Messages rendered by evaluating the loop body, found remembered, and made by splicing their content into a kept shape. */
  rendered = 0;
  reused = 0;
  spliced = 0;
  /** True when the loop body's output is fixed text around the content (core/tokens/content-splice.ts); why not otherwise. */
  readonly spliceable: true | string;

  private constructor(folder: ChatTemplateFolder, plan: MessageLoop, maxBytes: number) {
    this.#folder = folder;
    this.plan = plan;
    this.links = new LinkCache(maxBytes);
    this.#interpreter = new Interpreter() as unknown as Evaluator;
    this.spliceable = contentSpliceable(plan.loop.body as JinjaNode[], plan.loopVar);
  }

  /** A renderer for the folder's template, or why it must be rendered whole. */
  static for(folder: ChatTemplateFolder, maxBytes: number): IncrementalRenderer | { readonly whole: string } {
    if (!folder.template) return { whole: 'no chat template' };
    const plan = messageLoop(folder.template);
    return 'whole' in plan ? plan : new IncrementalRenderer(folder, plan, maxBytes);
  }

  /** The chat's links, or undefined when this chat must be rendered whole (continue_final_message, no looped message). */
  render(input: ChatInput, now: Date): RenderedChat | undefined {
    if (input.continue_final_message || input.messages.length === 0) return undefined;
    const root = this.#root(input, now);
    if (root === undefined || input.messages.length <= root.offset) return undefined;
    const links: RenderLink[] = [root];
    let parent: RenderLink = root;
    for (let i = root.offset; i < input.messages.length; i++) {
      const raw = input.messages[i];
      const plain = plainMessage(raw);
      const key = plain !== undefined ? plainKey(parent.id, plain.role, plain.content) : jsonKey(parent.id, raw);
      let link = plain !== undefined ? this.links.getPlain(key as number, parent.id, plain.role, plain.content) : this.links.getJson(key as string);
      if (link === undefined) {
        link = { id: this.#nextId++, output: this.#output(root, raw, plain, i - root.offset) };
        this.links.set(key, link, plain && { parent: parent.id, role: plain.role, content: plain.content });
      } else this.reused++;
      links.push(link);
      parent = link;
    }
    return { links, post: root.post };
  }

  /** PRE and POST for these variables (and first message, where PRE reads it), rendered once. */
  #root(input: ChatInput, now: Date): Root | undefined {
    // A plain first message (a system prompt, often a long document) is keyed by its fingerprint, its content compared
    // on a hit, as a message's key is (plainKey): its JSON is not made and hashed every turn. A string cannot be mistaken for the JSON
    // of a message (an object).
    const first = this.plan.preReadsFirstMessage ? input.messages[0] : null;
    const plainFirst = first === null ? undefined : plainMessage(first);
    const key = JSON.stringify([
      input.chat_template_kwargs ?? null,
      input.tools ?? null,
      input.documents ?? null,
      input.add_generation_prompt ?? true,
      plainFirst !== undefined ? plainFingerprint(plainFirst) : first,
      this.plan.clockFormats.map((format) => strftimeUtc(now, format)),
    ]);
    const known = this.#roots.get(key);
    if (known !== undefined && known.firstContent === plainFirst?.content) {
      this.#roots.delete(key);
      this.#roots.set(key, known);
      return known;
    }
    // PRE reads at most the first message and the list's length (through its alias): the rest stand in
    // empty, so a kept root holds one message, not its first conversation.
    const stand = input.messages.map((m, i) => (i === 0 ? templateMessage(m) : {}));
    const env = chatEnvironment(this.#folder, input, now, stand);
    const output = this.#interpreter.evaluateBlock(this.plan.pre, env).value;
    let offset = 0;
    if (this.plan.alias !== undefined) {
      const list = env.lookupVariable(this.plan.alias) as { value?: unknown };
      if (!Array.isArray(list.value)) return undefined;
      offset = input.messages.length - list.value.length;
    }
    const post = this.#interpreter.evaluateBlock(this.plan.post, new Environment(env)).value;
    const root: Root = { id: this.#nextId++, output, env, offset, post, shapes: new Map(), firstContent: plainFirst?.content };
    this.#roots.delete(key); // another first message with the same fingerprint: the newer one takes the key
    this.#roots.set(key, root);
    if (this.#roots.size > MAX_ROOTS) this.#roots.delete(this.#roots.keys().next().value!);
    return root;
  }

  /** A new message's loop output: its content spliced into its role and position's shape where the body allows, rendered otherwise. */
  #output(root: Root, raw: unknown, plain: { readonly role: string; readonly content: string } | undefined, index: number): string {
    if (plain !== undefined && this.spliceable === true) {
      const key = `${index}\u0000${plain.role}`;
      let shape = root.shapes.get(key);
      if (shape === undefined && root.shapes.size < MAX_SHAPES) {
        shape = spliceShape((content) => this.#renderMessage(root, { role: plain.role, content }, index)) ?? null;
        root.shapes.set(key, shape);
      }
      if (shape) {
        this.spliced++;
        return spliceContent(shape, plain.content);
      }
    }
    this.rendered++;
    return this.#renderMessage(root, raw, index);
  }

  /** One message's loop output at loop position `index`: the body in a scope like the interpreter's loop scope. */
  #renderMessage(root: Root, raw: unknown, index: number): string {
    const scope = new Environment(root.env);
    scope.set('loop', { index: index + 1, index0: index, first: index === 0 });
    scope.set(this.plan.loopVar, templateMessage(raw));
    return this.#interpreter.evaluateBlock(this.plan.loop.body as JinjaNode[], scope).value;
  }
}
