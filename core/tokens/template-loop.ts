// Whether a chat template renders each message on its own (docs/tokens.md,
// "Speed"). Many templates are `PRE {% for message in messages %}BODY{% endfor %} POST`
// where BODY reads only its message, its index and values fixed before the
// loop. Their rendering is then PRE's output, one BODY output per message
// and POST's output, and a conversation's next turn only renders its new
// messages (core/tokens/incremental-render.ts). This module proves that
// shape from the parsed template, conservatively: anything it does not
// understand (macros, namespaces written in the loop, `loop.last`, a read of
// `messages` inside the loop, the clock) means "render whole", never a guess.
import type { Template } from '@huggingface/jinja';

/** A node of @huggingface/jinja's parsed program (its classes are not exported; `type` names them). */
export interface JinjaNode {
  readonly type: string;
  readonly [field: string]: unknown;
}

export interface MessageLoop {
  /** Top-level statements before the loop: rendered once per (globals, first message). */
  readonly pre: readonly JinjaNode[];
  /** The loop over the messages; its body is rendered once per message and position. */
  readonly loop: JinjaNode;
  readonly loopVar: string;
  /** Top-level statements after the loop: they read no message. */
  readonly post: readonly JinjaNode[];
  /** The name the loop iterates when PRE sets it from `messages` (`loop_messages`). */
  readonly alias?: string;
  /** PRE reads `messages[0]`: its output depends on the first message. */
  readonly preReadsFirstMessage: boolean;
  /** The formats the template passes strftime_now: the rendering depends on the clock only through them. */
  readonly clockFormats: readonly string[];
}

const LOOP_FIELDS_THE_BODY_MAY_READ = new Set(['index0', 'index', 'first']);
/** Globals whose value is not fixed by the request's variables (strftime_now is, when called with a literal format). */
const IMPURE_GLOBALS = new Set(['strftime_now', 'namespace']);

class NotPerMessage extends Error {}
const fail = (why: string): never => {
  throw new NotPerMessage(why);
};

/** Every Identifier read and every name written under `node`, with the loop-scoping rules of the body check. */
interface Scan {
  readonly reads: Set<string>;
  readonly writes: Set<string>;
  /** strftime_now("LITERAL") calls: what the clock can change. */
  readonly clock?: Set<string>;
}

const newScan = (): Required<Scan> => ({ reads: new Set(), writes: new Set(), clock: new Set() });

function scanNames(node: unknown, scan: Scan, bound: ReadonlySet<string>, inNestedLoop: boolean): void {
  if (node === undefined || node === null) return;
  if (Array.isArray(node)) {
    for (const n of node) scanNames(n, scan, bound, inNestedLoop);
    return;
  }
  const n = node as JinjaNode;
  const visit = (child: unknown, b = bound, nested = inNestedLoop) => scanNames(child, scan, b, nested);
  switch (n.type) {
    case 'Program':
    case 'Comment':
    case 'IntegerLiteral':
    case 'FloatLiteral':
    case 'StringLiteral':
      if (n.type === 'Program') visit(n.body);
      return;
    case 'Identifier': {
      const name = n.value as string;
      if (name === 'loop' && !bound.has(name)) fail('the loop body uses its loop object whole');
      if (!bound.has(name)) scan.reads.add(name);
      return;
    }
    case 'ArrayLiteral':
    case 'TupleLiteral':
      visit(n.value);
      return;
    case 'ObjectLiteral':
      for (const [k, v] of n.value as Map<unknown, unknown>) {
        visit(k);
        visit(v);
      }
      return;
    case 'MemberExpression': {
      const object = n.object as JinjaNode;
      if (object.type === 'Identifier' && object.value === 'loop' && !bound.has('loop')) {
        // The messages loop's own `loop`: only what does not depend on how many messages follow.
        const property = n.property as JinjaNode;
        if (n.computed || property.type !== 'Identifier' || !LOOP_FIELDS_THE_BODY_MAY_READ.has(property.value as string))
          fail('the loop body reads loop.last, loop.length or another field that depends on later messages');
        return;
      }
      visit(object);
      if (n.computed) visit(n.property);
      return;
    }
    case 'CallExpression': {
      const callee = n.callee as JinjaNode;
      const args = n.args as JinjaNode[];
      if (
        callee.type === 'Identifier' &&
        callee.value === 'strftime_now' &&
        !bound.has('strftime_now') &&
        args.length === 1 &&
        args[0].type === 'StringLiteral'
      ) {
        scan.clock?.add(args[0].value as string);
        return;
      }
      visit(callee);
      visit(args);
      return;
    }
    case 'BinaryExpression':
      visit(n.left);
      visit(n.right);
      return;
    case 'UnaryExpression':
      visit(n.argument);
      return;
    case 'FilterExpression': {
      visit(n.operand);
      const filter = n.filter as JinjaNode;
      if (filter.type === 'CallExpression') visit(filter.args);
      return;
    }
    case 'TestExpression': {
      // `strftime_now is defined` asks whether there is a clock: there always is.
      const operand = n.operand as JinjaNode;
      if (operand.type !== 'Identifier' || operand.value !== 'strftime_now') visit(operand);
      return;
    }
    case 'SelectExpression':
      visit(n.lhs);
      visit(n.test);
      return;
    case 'SliceExpression':
      visit(n.start);
      visit(n.stop);
      visit(n.step);
      return;
    case 'KeywordArgumentExpression':
      visit(n.value);
      return;
    case 'SpreadExpression':
    case 'KeywordSpreadExpression':
      visit(n.argument);
      return;
    case 'Ternary':
      visit(n.condition);
      visit(n.trueExpr);
      visit(n.falseExpr);
      return;
    case 'If':
      visit(n.test);
      visit(n.body);
      visit(n.alternate);
      return;
    case 'Set': {
      const assignee = n.assignee as JinjaNode;
      if (assignee.type === 'Identifier') scan.writes.add(assignee.value as string);
      else if (assignee.type === 'TupleLiteral') for (const e of assignee.value as JinjaNode[]) scan.writes.add(e.value as string);
      else fail('the template writes an attribute (a namespace)');
      visit(n.value);
      visit(n.body);
      return;
    }
    case 'For': {
      // The nested loop's variables and its `loop` are its own.
      const loopvar = n.loopvar as JinjaNode;
      const names = loopvar.type === 'Identifier' ? [loopvar.value as string] : ((loopvar.value as JinjaNode[]) ?? []).map((e) => e.value as string);
      const inner = new Set([...bound, ...names, 'loop']);
      const iterable = n.iterable as JinjaNode;
      if (iterable.type === 'SelectExpression') {
        visit(iterable.lhs);
        visit(iterable.test, inner, true);
      } else visit(iterable);
      // Its variables live in the nested loop's own scope, not in the one the messages loop shares.
      visit(n.body, inner, true);
      visit(n.defaultBlock);
      return;
    }
    case 'Break':
    case 'Continue':
      if (!inNestedLoop) fail('the loop over messages breaks or continues');
      return;
    default:
      fail(`the template uses ${n.type}`);
  }
}

/** Every name a statement touches (reads or writes), for the "set before read" check. */
function touches(node: unknown): Set<string> {
  const scan = newScan();
  scanNames(node, scan, new Set(['loop']), true);
  return new Set([...scan.reads, ...scan.writes]);
}

/** `messages` or `messages[N:]` (N a literal): what PRE may give the loop under another name. */
function isMessagesOrSuffix(value: JinjaNode | undefined): boolean {
  if (!value) return false;
  if (value.type === 'Identifier') return value.value === 'messages';
  if (value.type !== 'MemberExpression' || !value.computed) return false;
  const object = value.object as JinjaNode;
  const slice = value.property as JinjaNode;
  return (
    object.type === 'Identifier' &&
    object.value === 'messages' &&
    slice.type === 'SliceExpression' &&
    (slice.start as JinjaNode | undefined)?.type === 'IntegerLiteral' &&
    slice.stop === undefined &&
    slice.step === undefined
  );
}

/** PRE may read `messages` only as `messages[0]...` and as the loop's alias: true when it reads messages[0]. */
function checkPre(pre: readonly JinjaNode[], alias: string | undefined): boolean {
  let readsFirst = false;
  const walk = (node: unknown): void => {
    if (node === undefined || node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach(walk);
    const n = node as JinjaNode;
    if (n.type === 'Set' && alias !== undefined && (n.assignee as JinjaNode).type === 'Identifier' && (n.assignee as JinjaNode).value === alias) {
      if (!isMessagesOrSuffix(n.value as JinjaNode)) fail(`the loop's list ${alias} is not messages or a slice of it`);
      return;
    }
    if (n.type === 'MemberExpression') {
      const object = n.object as JinjaNode;
      const property = n.property as JinjaNode;
      if (object.type === 'Identifier' && object.value === 'messages') {
        if (!n.computed || property.type !== 'IntegerLiteral' || property.value !== 0) fail('the template reads messages other than the first before the loop');
        readsFirst = true;
        return;
      }
    }
    if (n.type === 'Identifier' && n.value === 'messages') fail('the template reads the whole message list before the loop');
    for (const [key, value] of Object.entries(n)) {
      if (key === 'type') continue;
      if (value instanceof Map) for (const [k, v] of value) walk([k, v]);
      else walk(value);
    }
  };
  walk(pre);
  return readsFirst;
}

/** The template's per-message shape, or why it has none (then it is rendered whole). */
export function messageLoop(template: Template): MessageLoop | { readonly whole: string } {
  try {
    const body = (template.parsed as unknown as { body: JinjaNode[] }).body;
    const loops = body.flatMap((s, i) => (s.type === 'For' ? [i] : []));
    if (loops.length !== 1) fail('the template has no single top-level loop over the messages');
    const at = loops[0];
    const loop = body[at];
    const pre = body.slice(0, at);
    const post = body.slice(at + 1);
    const loopvar = loop.loopvar as JinjaNode;
    const iterable = loop.iterable as JinjaNode;
    if (loopvar.type !== 'Identifier' || iterable.type !== 'Identifier') fail('the loop is not `for NAME in LIST`');
    if (Array.isArray(loop.defaultBlock) && loop.defaultBlock.length > 0) fail('the loop has an else block');
    const loopVar = loopvar.value as string;
    const list = iterable.value as string;
    const preScan = newScan();
    scanNames(pre, preScan, new Set(), false);
    const alias = list === 'messages' ? undefined : list;
    if (alias !== undefined && !preScan.writes.has(alias)) fail('the loop does not iterate the messages');
    const preReadsFirstMessage = checkPre(pre, alias);
    for (const name of preScan.reads) if (IMPURE_GLOBALS.has(name)) fail(`the template calls ${name} before the loop`);

    // The body: reads only its message, `loop.index0/index/first`, and names fixed before the loop.
    const bodyScan = newScan();
    scanNames(loop.body, bodyScan, new Set([loopVar]), false);
    for (const name of bodyScan.reads) {
      if (name === 'messages' || name === alias) fail('the loop body reads other messages');
      if (IMPURE_GLOBALS.has(name)) fail(`the loop body calls ${name}`);
    }
    // A name the body sets is shared by all its iterations: each must set it before anything reads it.
    for (const name of bodyScan.writes) {
      if (name === loopVar) fail('the loop body reassigns its message');
      const first = (loop.body as JinjaNode[]).find((s) => touches(s).has(name));
      const setsFirst =
        first?.type === 'Set' &&
        (first.assignee as JinjaNode).type === 'Identifier' &&
        (first.assignee as JinjaNode).value === name &&
        first.value !== undefined &&
        first.value !== null &&
        !touches(first.value).has(name);
      if (!setsFirst) fail(`the loop body may read ${name} from an earlier message`);
    }
    const postScan = newScan();
    scanNames(post, postScan, new Set(), false);
    for (const name of postScan.reads) {
      if (name === 'messages' || name === alias || name === loopVar) fail('the template reads the messages after the loop');
      if (IMPURE_GLOBALS.has(name)) fail(`the template calls ${name} after the loop`);
    }
    const clockFormats = [...new Set([...preScan.clock, ...bodyScan.clock, ...postScan.clock])];
    return { pre, loop, loopVar, post, alias, preReadsFirstMessage, clockFormats };
  } catch (error) {
    if (error instanceof NotPerMessage) return { whole: error.message };
    throw error;
  }
}
