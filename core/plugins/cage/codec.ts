// What crosses into a plugin worker and back, encoded into shared memory:
// the request and candidates of a pick (router → worker) and the plugin's
// answer (worker → router). Compact on purpose: a pick over 128 candidates
// is a few kilobytes of numbers and string-table indexes, no JSON.
import type { Alternative, CachedPrefix, Candidate, Engine, PickResult, Priority, RoutedRequest } from '../../../sdk/types.ts';
import { A_NONE, A_PASS, A_PICK, A_THREW, FLAG_RESET_STRINGS, MAX_INTERNED, NEW_STRING, NO_STRING, WireOverflow, type Reader, type Writer } from './wire.ts';

/** Caps on what a plugin may send back: the router reads no more than this. */
export const MAX_REASON = 200;
export const MAX_REPLICA_ID = 256;
export const MAX_ALTERNATIVES = 32;
export const MAX_NOTE = 200;
export const MAX_ERROR = 500;
const MAX_STRING = 4096;

/** The router's side of the string table. */
export class StringTable {
  readonly #index = new Map<string, number>();
  #reset = true;

  /** The message flags to start the next message with. */
  flags(): number {
    if (this.#index.size >= MAX_INTERNED) this.clear();
    const flags = this.#reset ? FLAG_RESET_STRINGS : 0;
    this.#reset = false;
    return flags;
  }

  /** After a message that was not sent whole: start over on both sides. */
  clear(): void {
    this.#index.clear();
    this.#reset = true;
  }

  write(w: Writer, text: string): void {
    const known = this.#index.get(text);
    if (known !== undefined) return w.i32(known);
    w.i32(NEW_STRING);
    w.str(text, MAX_STRING);
    this.#index.set(text, this.#index.size);
  }

  writeOptional(w: Writer, text: string | undefined): void {
    if (text === undefined) w.i32(NO_STRING);
    else this.write(w, text);
  }
}

/** The worker's side of the string table. */
export class StringList {
  readonly #list: string[] = [];

  clear(): void {
    this.#list.length = 0;
  }

  read(r: Reader): string {
    const index = r.i32();
    if (index === NEW_STRING) {
      const text = r.str(MAX_STRING);
      this.#list.push(text);
      return text;
    }
    const text = this.#list[index];
    if (text === undefined) throw new RangeError(`unknown string ${index}`);
    return text;
  }

  readOptional(r: Reader): string | undefined {
    const at = r.at;
    if (r.i32() === NO_STRING) return undefined;
    r.at = at;
    return this.read(r);
  }
}

export function writeRequest(w: Writer, strings: StringTable, request: RoutedRequest): void {
  w.str(request.id, MAX_STRING);
  strings.write(w, request.model);
  strings.write(w, request.version);
  strings.writeOptional(w, request.adapter);
  strings.write(w, request.pool);
  strings.write(w, request.tenant);
  if (request.conversationId === undefined) w.u8(0);
  else {
    w.u8(1);
    w.str(request.conversationId, MAX_STRING);
  }
  w.u8(request.priority === 'batch' ? 1 : 0);
  w.f64(request.promptTokens);
  w.f64(request.maxTokens);
  // Token ids, like prefix hashes, cross only when the plugin reads them.
  w.u8(request.promptTokenIds === undefined ? 0 : 1);
}

export function writeCandidates(w: Writer, strings: StringTable, candidates: readonly Candidate[]): void {
  w.i32(candidates.length);
  for (let i = 0; i < candidates.length; i++) {
    const c = candidates[i];
    const s = c.signals;
    strings.write(w, c.id);
    strings.write(w, c.url);
    strings.write(w, c.engine);
    w.u8(c.saturated ? 1 : 0);
    w.f64(s.kvUsage);
    w.f64(s.queueDepth);
    w.f64(s.running);
    w.f64(s.inFlight);
    w.f64(s.ageMs);
    w.u8(s.stale ? 1 : 0);
    const adapters = s.loadedAdapters;
    w.i32(adapters.length);
    for (let a = 0; a < adapters.length; a++) strings.write(w, adapters[a]);
    w.f64(c.capacity.maxLoras);
    w.f64(c.capacity.maxBatch);
    w.f64(c.capacity.maxQueue);
  }
}

/** A request as a plugin in the worker sees it; prefix hashes are fetched from the router on first use. */
export class WorkerRequest implements RoutedRequest {
  readonly id: string;
  readonly model: string;
  readonly version: string;
  readonly adapter?: string;
  readonly pool: string;
  readonly tenant: string;
  readonly conversationId?: string;
  readonly priority: Priority;
  readonly promptTokens: number;
  readonly maxTokens: number;
  #hashes: readonly number[] | undefined;
  #tokens: Uint32Array | undefined;
  readonly #hasTokens: boolean;
  readonly #fetch: RequestData;

  constructor(r: Reader, strings: StringList, fetch: RequestData) {
    this.id = r.str(MAX_STRING);
    this.model = strings.read(r);
    this.version = strings.read(r);
    const adapter = strings.readOptional(r);
    if (adapter !== undefined) this.adapter = adapter;
    this.pool = strings.read(r);
    this.tenant = strings.read(r);
    if (r.u8() === 1) this.conversationId = r.str(MAX_STRING);
    this.priority = r.u8() === 1 ? 'batch' : 'interactive';
    this.promptTokens = r.f64();
    this.maxTokens = r.f64();
    this.#hasTokens = r.u8() === 1;
    this.#fetch = fetch;
  }

  get prefixHashes(): readonly number[] {
    return (this.#hashes ??= this.#fetch.hashes());
  }

  get promptTokenIds(): Uint32Array | undefined {
    if (!this.#hasTokens) return undefined;
    return (this.#tokens ??= this.#fetch.tokens());
  }
}

/** How a request in the worker gets what crosses only on first use. */
export interface RequestData {
  hashes(): readonly number[];
  tokens(): Uint32Array | undefined;
}

/** A KV index lookup's answer, router → worker (the side region): replica ids inline, capped. */
export function writeCachedPrefixes(w: Writer, entries: readonly CachedPrefix[]): number {
  let n = 0;
  for (const e of entries) {
    const at = w.at;
    try {
      w.str(String(e.replica), MAX_REPLICA_ID);
      w.f64(e.blocks);
      w.f64(e.ageMs);
      w.f64(e.tokens ?? NaN);
    } catch (error) {
      if (!(error instanceof WireOverflow)) throw error;
      w.at = at; // what does not fit is left out: a lookup is a hint
      break;
    }
    n++;
  }
  return n;
}

export function readCachedPrefixes(r: Reader, count: number): CachedPrefix[] {
  const out: CachedPrefix[] = [];
  for (let i = 0; i < count; i++) {
    const replica = r.str(MAX_REPLICA_ID);
    const blocks = r.f64();
    const ageMs = r.f64();
    const tokens = r.f64();
    out.push(Number.isNaN(tokens) ? { replica, blocks, ageMs } : { replica, blocks, ageMs, tokens });
  }
  return out;
}

export function readCandidates(r: Reader, strings: StringList): Candidate[] {
  const n = r.i32();
  const candidates = new Array<Candidate>(n);
  for (let i = 0; i < n; i++) {
    const id = strings.read(r);
    const url = strings.read(r);
    const engine = strings.read(r) as Engine;
    const saturated = r.u8() === 1;
    const kvUsage = r.f64();
    const queueDepth = r.f64();
    const running = r.f64();
    const inFlight = r.f64();
    const ageMs = r.f64();
    const stale = r.u8() === 1;
    const count = r.i32();
    const loadedAdapters = new Array<string>(count);
    for (let a = 0; a < count; a++) loadedAdapters[a] = strings.read(r);
    const capacity = { maxLoras: r.f64(), maxBatch: r.f64(), maxQueue: r.f64() };
    candidates[i] = { id, url, engine, saturated, signals: { kvUsage, queueDepth, running, inFlight, loadedAdapters, ageMs, stale }, capacity };
  }
  return candidates;
}

/** Any value a plugin returned, as a bounded string. */
const text = (value: unknown): string => (typeof value === 'string' ? value : value == null ? '' : String(value));

/** The worker writes what pick() returned (or threw). */
export function writePickAnswer(w: Writer, result: unknown, candidates: readonly Candidate[], pluginMs: number): void {
  if (result == null) {
    w.u8(A_NONE);
    w.f64(pluginMs);
    return;
  }
  const answer = result as { pass?: unknown; replica?: unknown; reason?: unknown; alternatives?: unknown };
  if (answer.pass === true) {
    w.u8(A_PASS);
    w.f64(pluginMs);
    w.str(text(answer.reason), MAX_REASON);
    return;
  }
  w.u8(A_PICK);
  w.f64(pluginMs);
  let index = -1;
  for (let i = 0; i < candidates.length; i++) {
    if (candidates[i].id === answer.replica) {
      index = i;
      break;
    }
  }
  w.i32(index);
  if (index < 0) w.str(typeof answer.replica === 'string' ? answer.replica : (JSON.stringify(answer.replica) ?? 'undefined'), MAX_REPLICA_ID);
  w.str(text(answer.reason), MAX_REASON);
  const alternatives = Array.isArray(answer.alternatives) ? answer.alternatives : [];
  const count = Math.min(alternatives.length, MAX_ALTERNATIVES);
  w.i32(count);
  for (let i = 0; i < count; i++) {
    const a = (alternatives[i] ?? {}) as { replica?: unknown; score?: unknown; note?: unknown };
    w.str(text(a.replica), MAX_REPLICA_ID);
    if (typeof a.score === 'number') {
      w.u8(1);
      w.f64(a.score);
    } else w.u8(0);
    if (a.note !== undefined) {
      w.u8(1);
      w.str(text(a.note), MAX_NOTE);
    } else w.u8(0);
  }
}

export function writeThrew(w: Writer, error: unknown, pluginMs: number): void {
  w.u8(A_THREW);
  w.f64(pluginMs);
  w.str(error instanceof Error ? error.message : text(error), MAX_ERROR);
}

/** What the router reads back: never more than the caps, whatever the worker wrote. */
export type PickAnswer =
  | { readonly kind: 'result'; readonly result: PickResult; readonly pluginMs: number }
  | { readonly kind: 'threw'; readonly message: string; readonly pluginMs: number };

export function readPickAnswer(r: Reader, candidates: readonly Candidate[]): PickAnswer {
  const kind = r.u8();
  const pluginMs = r.f64();
  switch (kind) {
    case A_NONE:
      return { kind: 'result', result: null, pluginMs };
    case A_PASS:
      return { kind: 'result', result: { pass: true, reason: r.str(MAX_REASON) }, pluginMs };
    case A_THREW:
      return { kind: 'threw', message: r.str(MAX_ERROR), pluginMs };
    case A_PICK: {
      const index = r.i32();
      const replica = index >= 0 && index < candidates.length ? candidates[index].id : r.str(MAX_REPLICA_ID);
      const reason = r.str(MAX_REASON);
      const count = r.i32();
      if (count < 0 || count > MAX_ALTERNATIVES) throw new RangeError(`${count} alternatives`);
      if (count === 0) return { kind: 'result', result: { replica, reason }, pluginMs };
      const alternatives: Alternative[] = [];
      for (let i = 0; i < count; i++) {
        const name = r.str(MAX_REPLICA_ID);
        const score = r.u8() === 1 ? r.f64() : undefined;
        const note = r.u8() === 1 ? r.str(MAX_NOTE) : undefined;
        alternatives.push({ replica: name, score, note });
      }
      return { kind: 'result', result: { replica, reason, alternatives }, pluginMs };
    }
    default:
      throw new RangeError(`unknown answer kind ${kind}`);
  }
}
