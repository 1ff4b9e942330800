// A plain message's loop output as text around its content (docs/tokens.md,
// "Speed"). Rendering the loop body costs tens of microseconds per message
// with @huggingface/jinja, and a next turn's new messages are new text. Many
// bodies use the content only by putting it, or it trimmed, into the output
// (Llama 3's: header + content|trim + <|eot_id|>): then the output for a
// `{role, content}` message at a given position is fixed text with the
// content spliced in, and the text is rendered once per role and position.
// This module proves that from the parsed body (the content is read only as
// `m.content`/`m['content']`, flows only through `+`/`~` concatenation, a
// `trim` filter applied to it directly, `set` and output; no test, call,
// filter, comparison or loop reads it, and the message is never used whole),
// and works out the fixed text by rendering stand-in contents. Anything the
// proof does not cover is rendered as before.
import type { JinjaNode } from './template-loop.ts';

/** How a value depends on the message's content: not at all, is it, or a string with it (or it trimmed) concatenated in. */
type Taint = 'clean' | 'content' | 'spliced';

class NotSpliceable extends Error {}
const fail = (why: string): never => {
  throw new NotSpliceable(why);
};

const join = (a: Taint, b: Taint): Taint => (a === b ? a : 'spliced');
const tainted = (t: Taint) => t !== 'clean';

type Env = Map<string, Taint>;

function mergeInto(target: Env, branch: Env): void {
  for (const [name, taint] of branch) target.set(name, join(target.get(name) ?? 'clean', taint));
}

class Proof {
  constructor(readonly loopVar: string) {}

  /** The message's own field `content`, or a field of it that is not the content (role, tool_calls: fixed for the key). */
  #messageField(n: JinjaNode): Taint | undefined {
    const object = n.object as JinjaNode;
    if (object.type !== 'Identifier' || object.value !== this.loopVar) return undefined;
    const property = n.property as JinjaNode;
    const name = !n.computed && property.type === 'Identifier' ? property.value : n.computed && property.type === 'StringLiteral' ? property.value : undefined;
    if (name === undefined) return fail('the loop body reads a computed field of its message');
    return name === 'content' ? 'content' : 'clean';
  }

  expr(node: unknown, env: Env): Taint {
    if (node === undefined || node === null) return 'clean';
    const n = node as JinjaNode;
    const clean = (...children: unknown[]): Taint => {
      for (const child of children) {
        const list = Array.isArray(child) ? child : [child];
        for (const c of list) if (tainted(this.expr(c, env))) fail(`the content reaches ${n.type}`);
      }
      return 'clean';
    };
    switch (n.type) {
      case 'IntegerLiteral':
      case 'FloatLiteral':
      case 'StringLiteral':
        return 'clean';
      case 'Identifier':
        if (n.value === this.loopVar) return fail('the loop body uses its message whole');
        return env.get(n.value as string) ?? 'clean';
      case 'ArrayLiteral':
      case 'TupleLiteral':
        return clean(n.value);
      case 'ObjectLiteral':
        for (const [k, v] of n.value as Map<unknown, unknown>) clean(k, v);
        return 'clean';
      case 'MemberExpression': {
        const field = this.#messageField(n);
        if (field !== undefined) return field;
        return clean(n.object, n.computed ? n.property : undefined);
      }
      case 'CallExpression':
        return clean(n.callee, n.args);
      case 'BinaryExpression': {
        const op = (n.operator as { value?: unknown }).value;
        const left = this.expr(n.left, env);
        const right = this.expr(n.right, env);
        // With a string operand `+` and `~` concatenate whatever the other is (or throw for none/undefined): no content value changes that.
        if ((op === '+' || op === '~') && (tainted(left) || tainted(right))) return 'spliced';
        if (tainted(left) || tainted(right)) fail(`the content is an operand of ${String(op)}`);
        return 'clean';
      }
      case 'UnaryExpression':
        return clean(n.argument);
      case 'FilterExpression': {
        const operand = this.expr(n.operand, env);
        const filter = n.filter as JinjaNode;
        if (filter.type === 'CallExpression') clean(filter.args);
        if (operand === 'clean') return 'clean';
        if (operand === 'content' && filter.type === 'Identifier' && filter.value === 'trim') return 'spliced';
        return fail('a filter other than trim reads the content');
      }
      case 'TestExpression':
        return clean(n.operand);
      case 'SelectExpression':
        clean(n.test);
        return this.expr(n.lhs, env);
      case 'SliceExpression':
        return clean(n.start, n.stop, n.step);
      case 'KeywordArgumentExpression':
        return this.expr(n.value, env);
      case 'SpreadExpression':
      case 'KeywordSpreadExpression':
        return clean(n.argument);
      case 'Ternary':
        clean(n.condition);
        return join(this.expr(n.trueExpr, env), this.expr(n.falseExpr, env));
      default:
        return fail(`the loop body uses ${n.type}`);
    }
  }

  /** Statements in order; what each outputs may hold the content (it is spliced there). */
  block(statements: readonly JinjaNode[], env: Env): Taint {
    let output: Taint = 'clean';
    for (const s of statements) output = join(output, this.statement(s, env));
    return output;
  }

  statement(n: JinjaNode, env: Env): Taint {
    switch (n.type) {
      case 'Comment':
      case 'Break':
      case 'Continue':
        return 'clean';
      case 'Set': {
        const assignee = n.assignee as JinjaNode;
        const value = n.value !== undefined && n.value !== null ? this.expr(n.value, env) : this.block((n.body as JinjaNode[]) ?? [], env);
        if (assignee.type === 'Identifier') {
          if (assignee.value === this.loopVar) fail('the loop body reassigns its message');
          env.set(assignee.value as string, value);
        } else if (assignee.type === 'TupleLiteral' && !tainted(value)) {
          for (const e of assignee.value as JinjaNode[]) env.set(e.value as string, 'clean');
        } else fail('the content is unpacked or written to a namespace');
        return 'clean';
      }
      case 'If': {
        if (tainted(this.expr(n.test, env))) fail('a test reads the content');
        const yes = new Map(env);
        const no = new Map(env);
        const out = join(this.block((n.body as JinjaNode[]) ?? [], yes), this.block((n.alternate as JinjaNode[]) ?? [], no));
        mergeInto(env, yes);
        mergeInto(env, no);
        return out;
      }
      case 'For': {
        const loopvar = n.loopvar as JinjaNode;
        const names = loopvar.type === 'Identifier' ? [loopvar.value as string] : ((loopvar.value as JinjaNode[]) ?? []).map((e) => e.value as string);
        if (names.includes(this.loopVar)) fail('a nested loop shadows the message');
        const iterable = n.iterable as JinjaNode;
        const inner = new Map(env);
        for (const name of [...names, 'loop']) inner.set(name, 'clean');
        if (iterable.type === 'SelectExpression') {
          if (tainted(this.expr(iterable.lhs, env)) || tainted(this.expr(iterable.test, inner))) fail('a loop iterates the content');
        } else if (tainted(this.expr(iterable, env))) fail('a loop iterates the content');
        // Taints only grow: a few passes reach what any number of iterations would.
        let out: Taint = 'clean';
        for (let pass = 0; pass < 3; pass++) out = join(out, this.block((n.body as JinjaNode[]) ?? [], inner));
        out = join(out, this.block((n.defaultBlock as JinjaNode[]) ?? [], new Map(env)));
        for (const name of names) inner.delete(name);
        inner.delete('loop');
        mergeInto(env, inner);
        return out;
      }
      default:
        // An expression statement: its value is output.
        return this.expr(n, env);
    }
  }
}

/** Whether the loop body's output is fixed text with the message's content (or it trimmed) spliced in, or why not. */
export function contentSpliceable(body: readonly JinjaNode[], loopVar: string): true | string {
  try {
    new Proof(loopVar).block(body, new Map());
    return true;
  } catch (error) {
    if (error instanceof NotSpliceable) return error.message;
    throw error;
  }
}

/** The fixed text around each place the content goes, and whether it goes there trimmed. */
export interface SpliceShape {
  readonly texts: readonly string[];
  readonly trimmed: readonly boolean[];
}

/** Private-use characters no template text holds (a rendering that does is not spliced: see spliceShape). */
const MARK = '\uE000\uF8FF\uE000';
const STAND_INS = [
  ['\u2028', '\u2029'],
  ['\u3000', '\u00A0'],
] as const;

function decode(output: string, left: string, right: string): SpliceShape | undefined {
  const pieces = output.split(MARK);
  const trimmed: boolean[] = [];
  for (let i = 0; i + 1 < pieces.length; i++) trimmed.push(!(pieces[i].endsWith(left) && pieces[i + 1].startsWith(right)));
  const texts: string[] = [];
  for (let i = 0; i < pieces.length; i++) {
    const start = i > 0 && !trimmed[i - 1] ? right.length : 0;
    const end = i < trimmed.length && !trimmed[i] ? left.length : 0;
    if (start + end > pieces[i].length) return undefined;
    texts.push(pieces[i].slice(start, pieces[i].length - end));
  }
  return { texts, trimmed };
}

/**
 * The shape of a proven body's output, from `render(content)` (the body
 * rendered for a stand-in message): rendered with two stand-in contents
 * (whitespace that trim removes around a private-use mark) that must decode
 * alike, and with "", whose output must be the fixed texts joined, which a
 * mark already in the template's text (from chat_template_kwargs, say)
 * would break. Undefined when they disagree, or the render throws: the
 * message is then rendered as before.
 */
export function spliceShape(render: (content: string) => string): SpliceShape | undefined {
  try {
    const [a, b] = STAND_INS.map(([left, right]) => decode(render(left + MARK + right), left, right));
    const empty = render('');
    if (a === undefined || b === undefined) return undefined;
    if (a.texts.length !== b.texts.length || a.texts.some((t, i) => t !== b.texts[i] || a.trimmed[i] !== b.trimmed[i])) return undefined;
    if (a.texts.join('') !== empty) return undefined;
    return a;
  } catch {
    return undefined;
  }
}

/** The body's output for `content`: the fixed texts with the content, or it trimmed, between them. */
export function spliceContent(shape: SpliceShape, content: string): string {
  let out = shape.texts[0];
  for (let i = 0; i < shape.trimmed.length; i++) out += (shape.trimmed[i] ? content.trim() : content) + shape.texts[i + 1];
  return out;
}
