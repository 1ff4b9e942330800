// The curated hostile inputs: what an attacker, a broken client or a fuzzer
// sends. Each case is a request over fetch or raw bytes over a socket, and
// may name the status it must get; every case must be answered in bounded
// time with a 2xx or 4xx and, for a 4xx, an OpenAI-shaped body.
import { gzipSync, deflateSync, brotliCompressSync } from 'node:zlib';

export type HostileCase =
  | {
      readonly name: string;
      readonly kind: 'http';
      readonly method?: string;
      readonly path?: string;
      readonly headers?: Record<string, string>;
      readonly body?: string | Buffer;
      readonly expect?: number;
    }
  | { readonly name: string; readonly kind: 'raw'; readonly bytes: string | Buffer; readonly expect?: number };

/** A case's body as fetch takes it. */
export function fetchBody(c: HostileCase & { kind: 'http' }): string | Blob | undefined {
  return typeof c.body === 'string' || c.body === undefined ? c.body : new Blob([new Uint8Array(c.body)]);
}

const CHAT = '/v1/chat/completions';
const JSON_HEADERS = { 'content-type': 'application/json' };
const user = (content: unknown) => ({ model: 'tiny', max_tokens: 2, messages: [{ role: 'user', content }] });
const chat = (name: string, body: unknown, expect?: number, headers: Record<string, string> = {}): HostileCase => ({
  name,
  kind: 'http',
  path: CHAT,
  headers: { ...JSON_HEADERS, ...headers },
  body: typeof body === 'string' ? body : JSON.stringify(body),
  expect,
});
const raw = (name: string, bytes: string | Buffer, expect?: number): HostileCase => ({ name, kind: 'raw', bytes, expect });
const rawPost = (name: string, head: string, body: string, expect?: number) =>
  raw(name, `POST ${CHAT} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${head}\r\n${body}`, expect);

const deepArrays = (n: number) => '['.repeat(n) + ']'.repeat(n);
const deepObjects = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);

export function curatedCases(): HostileCase[] {
  const cases: HostileCase[] = [];
  const add = (...c: HostileCase[]) => cases.push(...c);

  // A sane request, as a baseline inside the suite.
  add(chat('valid request', user('hello'), 200));

  // The model name.
  for (const n of [257, 1000, 100_000, 1_000_000]) add(chat(`model name of ${n} chars`, { ...user('hi'), model: 'm'.repeat(n) }, 400));
  add(chat('model name of 256 chars (allowed, unknown)', { ...user('hi'), model: 'm'.repeat(256) }, 404));
  for (const [label, model] of [
    ['empty', ''],
    ['number', 42],
    ['null', null],
    ['true', true],
    ['array', ['tiny']],
    ['object', { id: 'tiny' }],
    ['float', 1.5],
  ] as const)
    add(chat(`model ${label}`, { ...user('hi'), model }, 400));
  for (const model of [
    'tiny ',
    ' tiny',
    'TINY',
    'tiny\n',
    'tiny\u0000',
    '../../etc/passwd',
    'tiny@v1',
    'tiny@',
    '@',
    'tiny:lora',
    '\u202etiny',
    'ｔｉｎｙ',
    'tiny\ud800',
    '💥'.repeat(100),
    '%00',
    '${jndi:ldap://x}',
    "'; DROP TABLE models; --",
    'tiny/../tiny',
    '*',
    '.*',
    '(a+)+$',
    'a'.repeat(255) + '💥',
  ]) {
    add(chat(`model ${JSON.stringify(model).slice(0, 40)}`, { ...user('hi'), model }));
  }

  // Messages.
  add(chat('messages missing', { model: 'tiny' }, 400));
  add(chat('messages empty', { model: 'tiny', messages: [] }, 400));
  for (const [label, messages] of [
    ['string', 'hi'],
    ['number', 1],
    ['object', { role: 'user' }],
    ['null', null],
    ['array of strings', ['hi']],
    ['array of nulls', [null]],
    ['array of arrays', [[]]],
  ] as const) {
    add(chat(`messages ${label}`, { model: 'tiny', messages }, 400));
  }
  add(chat('message without role', { model: 'tiny', messages: [{ content: 'hi' }] }, 400));
  for (const role of [1, null, '', ['user'], { r: 1 }]) add(chat(`role ${JSON.stringify(role)}`, { model: 'tiny', messages: [{ role, content: 'hi' }] }, 400));
  for (const role of ['root', 'system\n', 'x'.repeat(10_000), '<|im_start|>', 'user\u0000'])
    add(chat(`odd role ${JSON.stringify(role).slice(0, 30)}`, { model: 'tiny', max_tokens: 2, messages: [{ role, content: 'hi' }] }));
  for (const [label, content] of [
    ['number', 7],
    ['true', true],
    ['object', { text: 'hi' }],
  ] as const)
    add(chat(`content ${label}`, user(content), 400));
  add(chat('content null', user(null)));
  add(
    chat(
      'content parts of odd shapes',
      user([{ type: 'text', text: 'a' }, { type: 'text', text: 5 }, null, 3, 'str', [], { type: 'image_url', image_url: { url: 'data:,' } }]),
    ),
  );
  add(chat('1024 content parts', user(Array.from({ length: 1024 }, () => ({ type: 'text', text: 'x' })))));
  add(chat('1025 content parts', user(Array.from({ length: 1025 }, () => ({ type: 'text', text: 'x' }))), 400));
  for (const n of [4096, 4097, 100_000]) {
    add(
      chat(
        `${n} messages`,
        { model: 'tiny', max_tokens: 2, messages: Array.from({ length: n }, () => ({ role: 'user', content: 'x' })) },
        n > 4096 ? 400 : undefined,
      ),
    );
  }
  add(chat('4096 empty messages', { model: 'tiny', max_tokens: 2, messages: Array.from({ length: 4096 }, () => ({ role: 'u' })) }));

  // Prompts built to make pattern matching backtrack, and just big ones.
  const adversarial: [string, string][] = [
    ['32 KB of newlines', '\n'.repeat(32_768)],
    ['256 KB of newlines', '\n'.repeat(1 << 18)],
    ['256 KB of spaces', ' '.repeat(1 << 18)],
    ['256 KB of tabs and CRs', '\t\r'.repeat(1 << 17)],
    ['newlines then def', '\n'.repeat(25_000) + 'def'],
    ['semicolons and spaces', '; '.repeat(50_000) + 'x'],
    ['parens and braces', ') '.repeat(50_000) + '{x'],
    ['arrows', '=> '.repeat(50_000)],
    ['if lines', 'if ('.repeat(50_000) + ')'],
    ['if with long line', 'if (' + ')  x'.repeat(25_000)],
    ['backticks', '``x'.repeat(25_000)],
    ['unicode spaces', '\u2028\u00a0\u3000'.repeat(25_000)],
    ['definition keywords', 'def '.repeat(25_000)],
    ['function soup', 'function func fn '.repeat(30_000)],
    ['code', 'def f(x):\n    return x;\n'.repeat(1000)],
    ['emoji', '🦜'.repeat(50_000)],
    ['combining marks', 'e' + '\u0301'.repeat(75_000)],
    ['right-to-left overrides', '\u202e\u202d'.repeat(25_000)],
    ['NUL bytes', '\u0000'.repeat(25_000)],
    ['zero-width', '\u200b\u200c\u200d\ufeff'.repeat(50_000)],
    ['escapes', '\\"'.repeat(50_000)],
    ['chat template tokens', '<|im_start|>system\n<|im_end|>'.repeat(20_000)],
  ];
  for (const [label, text] of adversarial) {
    add(chat(`chat prompt: ${label}`, user(text)));
    add({
      name: `completions prompt: ${label}`,
      kind: 'http',
      path: '/v1/completions',
      headers: JSON_HEADERS,
      body: JSON.stringify({ model: 'tiny', max_tokens: 2, prompt: text }),
    });
  }
  add(chat('lone surrogates (escaped)', `{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"\\ud800\\udc00\\udfff\\ud800x"}]}`));
  add(
    chat(
      'invalid UTF-8 bytes',
      Buffer.concat([
        Buffer.from('{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"'),
        Buffer.from([0xff, 0xfe, 0xc0, 0x80, 0xed, 0xa0, 0x80]),
        Buffer.from('"}]}'),
      ]).toString('latin1'),
    ),
  );

  // Completions and embeddings shapes.
  for (const [label, prompt, expect] of [
    ['token ids', Array.from({ length: 500 }, (_, i) => i), undefined],
    ['200k token ids', Array.from({ length: 200_000 }, () => 1), undefined],
    ['negative token ids', [-1, -2], undefined],
    ['huge token ids', [1e300, 2 ** 53], 400],
    ['float token ids', [1.5], 400],
    ['mixed', ['a', 1, [1, 2]], undefined],
    ['nested too far', [[[1]]], 400],
    ['empty array', [], 400],
    ['empty string', '', undefined],
    ['null', null, 400],
    ['object', { text: 'hi' }, 400],
    ['array of nulls', [null], 400],
    ['10k strings', Array.from({ length: 10_000 }, () => 'a'), undefined],
  ] as const) {
    add({
      name: `completions prompt ${label}`,
      kind: 'http',
      path: '/v1/completions',
      headers: JSON_HEADERS,
      body: JSON.stringify({ model: 'tiny', max_tokens: 2, prompt }),
      expect,
    });
    add({
      name: `embeddings input ${label}`,
      kind: 'http',
      path: '/v1/embeddings',
      headers: JSON_HEADERS,
      body: JSON.stringify({ model: 'tiny', input: prompt }),
      expect,
    });
  }

  // Wrong types and ranges on the fields the router reads.
  for (const [field, values] of [
    ['max_tokens', ['10', -1, 0, 1.5, 1e20, true, [], {}, 2 ** 31, Number.MAX_SAFE_INTEGER]],
    ['max_completion_tokens', ['10', -5, 0, 0.5, false, 1e9]],
    ['stream', ['true', 1, 0, [], {}, 'yes']],
    ['stream_options', ['x', 1, [], { include_usage: 'yes' }, { include_usage: 1 }]],
  ] as const) {
    for (const value of values) add(chat(`${field} = ${JSON.stringify(value)}`, { ...user('hi'), [field]: value }));
  }
  for (const [field, value] of [
    ['temperature', 'hot'],
    ['n', -1],
    ['top_p', {}],
    ['stop', [1, 2]],
    ['tools', 'x'],
    ['user', 'x'.repeat(100_000)],
    ['logit_bias', { a: 'b' }],
    ['seed', 1e300],
    ['__proto__', { polluted: true }],
    ['constructor', { prototype: { polluted: true } }],
  ] as const) {
    add(
      chat(
        `unknown field ${field}`,
        `{${JSON.stringify('model')}:"tiny","max_tokens":2,"messages":[{"role":"user","content":"hi"}],${JSON.stringify(field)}:${JSON.stringify(value)}}`,
      ),
    );
  }
  add(chat('stream with max_tokens 2', { ...user('hi'), stream: true }, 200));
  add(chat('many unknown fields', Object.fromEntries([...Object.entries(user('hi')), ...Array.from({ length: 5000 }, (_, i) => [`f${i}`, i])])));

  // Nesting.
  for (const n of [63, 64, 65, 100, 1000, 10_000, 100_000, 1_000_000]) {
    add(
      chat(
        `${n}-deep arrays in an extra field`,
        `{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"hi"}],"x":${deepArrays(n)}}`,
        n > 63 ? 400 : undefined,
      ),
    );
    add(
      chat(
        `${n}-deep objects in an extra field`,
        `{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"hi"}],"x":${deepObjects(n)}}`,
        n > 63 ? 400 : undefined,
      ),
    );
  }
  add(chat('10,000-deep body (20 KB)', deepArrays(10_000), 400));
  add(chat('content parts 61 deep (64 in all)', user(JSON.parse(deepArrays(61))), 200));
  add(chat('content parts 62 deep (65 in all)', user(JSON.parse(deepArrays(62))), 400));
  add(chat('unbalanced brackets', '['.repeat(100_000), 400));
  add(chat('closing brackets only', ']'.repeat(100_000), 400));
  add(chat('2 million empty arrays', `{"x":[${'[],'.repeat(2_000_000)}[]]}`, 400));
  add(chat('a million small objects', `{"x":[${'{},'.repeat(1_000_000)}{}]}`, 400));
  add(chat('a million members', `{${Array.from({ length: 600_000 }, (_, i) => `"k${i}":1`).join(',')}}`, 400));

  // Not JSON, or not the JSON expected.
  for (const body of [
    '',
    ' ',
    '{',
    '}',
    '{"model":',
    'null',
    'true',
    '123',
    '"str"',
    '[]',
    '[1,2]',
    "{'model':'tiny'}",
    '{"model":"tiny",}',
    '{"a":1}garbage',
    '\ufeff{"model":"tiny"}',
    '{"model":NaN}',
    '{"model":Infinity}',
    '/* c */{}',
    '{"model":"tiny"}\u0000',
    '{"m":1e999999}',
    '{"m":' + '1'.repeat(100_000) + '}',
    '{"model":"\\x41"}',
    '{"model":"\\u12"}',
    '{"model":"tiny","model":"other","messages":[{"role":"user","content":"hi"}]}',
  ]) {
    add(chat(`body ${JSON.stringify(body).slice(0, 40)}`, body));
  }
  add(chat('__proto__ key', '{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"hi"}],"__proto__":{"x":1}}', 200));
  add(
    chat('constructor.prototype key', '{"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"hi"}],"constructor":{"prototype":{"x":1}}}', 200),
  );

  // Sizes.
  add(chat('body just over the limit', user('x'.repeat(8 * 1024 * 1024)), 413));
  for (let i = 0; i < 4; i++) add(chat(`7.5 MB model name #${i}`, { ...user('hi'), model: 'M'.repeat(7_500_000) }, 400));

  // Headers.
  for (const value of [
    '0x10',
    '1e20',
    '-1',
    '0',
    '1.5',
    'abc',
    '3600001',
    '99999999999',
    '5 5',
    '+5',
    '5ms',
    'Infinity',
    'NaN',
    '',
    '00',
    '1_000',
    '0b11',
    '1e3',
    '0x0',
  ]) {
    add(chat(`x-deadline-ms ${JSON.stringify(value)}`, user('hi'), 400, { 'x-deadline-ms': value }));
  }
  add(rawPost('x-deadline-ms in full-width digits', `Content-Type: application/json\r\nX-Deadline-Ms: \uff11\uff12\r\nContent-Length: 2\r\n`, '{}', 400));
  for (const value of ['60000', '3600000', '05000']) add(chat(`x-deadline-ms ${value} (valid)`, user('hi'), undefined, { 'x-deadline-ms': value }));
  // Whitespace around a field value is not part of it (RFC 9110): " 5 " on the wire is "5".
  add(
    rawPost(
      'x-deadline-ms " 5 " on the wire',
      `Content-Type: application/json\r\nX-Deadline-Ms:  5000 \t\r\nContent-Length: ${JSON.stringify(user('hi')).length}\r\n`,
      JSON.stringify(user('hi')),
    ),
  );
  add(
    rawPost(
      'x-deadline-ms "5 0x10"',
      `Content-Type: application/json\r\nX-Deadline-Ms: 5 0x10\r\nContent-Length: ${JSON.stringify(user('hi')).length}\r\n`,
      JSON.stringify(user('hi')),
      400,
    ),
  );
  for (const value of ['urgent', '', 'INTERACTIVE', 'batchy', 'x'.repeat(8000)])
    add(chat(`x-priority ${JSON.stringify(value).slice(0, 30)}`, user('hi'), 400, { 'x-priority': value }));
  for (const value of ['Basic abc', 'Bearer', 'Bearer ', 'bearer sk-test', 'Bearer a b', 'Bearer ' + 'k'.repeat(8000), 'Token x', 'Bearer\tsk-test'])
    add(chat(`authorization ${JSON.stringify(value).slice(0, 30)}`, user('hi'), undefined, { authorization: value }));
  add(chat('x-conversation-id of 256 chars', user('hi'), undefined, { 'x-conversation-id': 'c'.repeat(256) }));
  add(chat('x-conversation-id of 257 chars', user('hi'), 400, { 'x-conversation-id': 'c'.repeat(257) }));
  add(chat('x-conversation-id of 10 KB', user('hi'), 400, { 'x-conversation-id': 'c'.repeat(10_000) }));
  for (const id of ['', ' ', 'x'.repeat(129), 'id with spaces', 'a'.repeat(128)])
    add(chat(`x-request-id ${JSON.stringify(id).slice(0, 20)}`, user('hi'), undefined, { 'x-request-id': id }));
  add(chat('a 20 KB header', user('hi'), 431, { 'x-big': 'b'.repeat(20_000) }));
  add(chat('headers adding up to 20 KB', user('hi'), 431, Object.fromEntries(Array.from({ length: 400 }, (_, i) => [`x-h${i}`, 'v'.repeat(50)]))));
  for (const type of [
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=x',
    'application/json; charset=utf-16',
    'application/jsonx',
    'APPLICATION/JSON',
    'application/json;;;',
    '',
  ]) {
    add({
      name: `content-type ${JSON.stringify(type)}`,
      kind: 'http',
      path: CHAT,
      headers: type === '' ? {} : { 'content-type': type },
      body: JSON.stringify(user('hi')),
    });
  }

  // Compressed bodies the router does not decode.
  const plain = Buffer.from(JSON.stringify(user('hi')));
  for (const [encoding, body] of [
    ['gzip', gzipSync(plain)],
    ['deflate', deflateSync(plain)],
    ['br', brotliCompressSync(plain)],
    ['gzip', plain],
    ['x-unknown', plain],
    ['gzip, identity', plain],
    ['GZIP', gzipSync(plain)],
  ] as const) {
    add({ name: `content-encoding ${encoding}`, kind: 'http', path: CHAT, headers: { ...JSON_HEADERS, 'content-encoding': encoding }, body, expect: 415 });
  }
  add({ name: 'content-encoding identity', kind: 'http', path: CHAT, headers: { ...JSON_HEADERS, 'content-encoding': 'identity' }, body: plain, expect: 200 });
  add({
    name: 'gzip bomb',
    kind: 'http',
    path: CHAT,
    headers: { ...JSON_HEADERS, 'content-encoding': 'gzip' },
    body: gzipSync(Buffer.alloc(50_000_000, 32)),
    expect: 415,
  });

  // Routes and methods.
  for (const [method, path] of [
    ['GET', CHAT],
    ['PUT', CHAT],
    ['DELETE', '/v1/models'],
    ['PATCH', '/v1/completions'],
    ['OPTIONS', CHAT],
    ['GET', '/'],
    ['GET', '/v1'],
    ['GET', '/v1/models/../../admin'],
    ['GET', '/v1/models?' + 'q'.repeat(5000)],
    ['GET', '/v1/%zz'],
    ['GET', '/v1/models%00'],
    ['GET', '/' + 'a'.repeat(8000)],
    ['POST', '/v1/chat/completions/'],
    ['POST', '//v1/chat/completions'],
    ['HEAD', '/v1/models'],
    ['GET', '/v1/models'],
  ] as const) {
    add({ name: `${method} ${path.slice(0, 40)}`, kind: 'http', method, path });
  }

  // Raw bytes: what fetch refuses to send.
  add(rawPost('CR inside a header value', 'Content-Type: application/json\r\nX-Bad: a\rb\r\nContent-Length: 2\r\n', '{}', 400));
  add(rawPost('LF inside a header value', 'Content-Type: application/json\r\nX-Bad: a\nb: c\r\nContent-Length: 2\r\n', '{}'));
  add(rawPost('NUL in a header value', 'Content-Type: application/json\r\nX-Bad: a\u0000b\r\nContent-Length: 2\r\n', '{}', 400));
  add(rawPost('header without a colon', 'Content-Type: application/json\r\nNoColon\r\nContent-Length: 2\r\n', '{}', 400));
  add(rawPost('space before the colon', 'Content-Type : application/json\r\nContent-Length: 2\r\n', '{}', 400));
  add(rawPost('header name with a space', 'Content Type: application/json\r\nContent-Length: 2\r\n', '{}', 400));
  add(rawPost('obsolete line folding', 'Content-Type: application/json\r\nX-Fold: a\r\n b\r\nContent-Length: 2\r\n', '{}'));
  add(rawPost('negative Content-Length', 'Content-Type: application/json\r\nContent-Length: -1\r\n', '{}', 400));
  add(rawPost('non-numeric Content-Length', 'Content-Type: application/json\r\nContent-Length: abc\r\n', '{}', 400));
  add(rawPost('two different Content-Lengths', 'Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n', '{}', 400));
  add(
    rawPost(
      'Content-Length and chunked together',
      'Content-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n',
      '2\r\n{}\r\n0\r\n\r\n',
      400,
    ),
  );
  add(rawPost('bad chunk size', 'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n', 'zz\r\n{}\r\n0\r\n\r\n', 400));
  add(
    rawPost(
      'chunked valid body',
      'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n',
      (() => {
        const b = JSON.stringify(user('hi'));
        return `${b.length.toString(16)}\r\n${b}\r\n0\r\n\r\n`;
      })(),
      200,
    ),
  );
  add(rawPost('unknown transfer-encoding', 'Content-Type: application/json\r\nTransfer-Encoding: gzip\r\n', '{}', 400));
  add(rawPost('huge Content-Length', 'Content-Type: application/json\r\nContent-Length: 99999999999\r\n', '{}', 413));
  add(rawPost('Content-Length 18 digits', 'Content-Type: application/json\r\nContent-Length: 999999999999999999\r\n', '{}'));
  add(rawPost('Expect: 100-continue', 'Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 2\r\n', '{}'));
  add(rawPost('Expect: something else', 'Content-Type: application/json\r\nExpect: teapot\r\nContent-Length: 2\r\n', '{}'));
  add(rawPost('request line and LF-only endings', '', ''));
  add(raw('LF-only line endings', `POST ${CHAT} HTTP/1.1\nHost: x\nConnection: close\nContent-Type: application/json\nContent-Length: 2\n\n{}`));
  add(raw('unknown method', 'BREW /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 400));
  add(raw('lower-case method', 'get /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 400));
  add(raw('HTTP/0.9', 'GET /v1/models\r\n\r\n'));
  add(raw('HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
  add(raw('HTTP/3.0 version', 'GET /v1/models HTTP/3.0\r\nHost: x\r\n\r\n', 400));
  add(raw('absolute-form target', 'GET http://example.com/v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
  add(raw('asterisk target', 'OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
  add(raw('no Host header', 'GET /v1/models HTTP/1.1\r\nConnection: close\r\n\r\n'));
  add(raw('two Host headers', 'GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n'));
  add(raw('request line of 20 KB', `GET /${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431));
  add(raw('1000 small headers', `GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${'X-A: b\r\n'.repeat(1000)}\r\n`));
  add(raw('5000 small headers', `GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${'X-A: bbbb\r\n'.repeat(5000)}\r\n`, 431));
  add(raw('random bytes', Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919 + 13) % 256)), 400));
  add(raw('a TLS ClientHello', Buffer.from('16030100a5010000a10303' + '00'.repeat(150), 'hex'), 400));
  add(raw('NUL bytes only', Buffer.alloc(1000), 400));
  add(raw('CRLFs only', '\r\n'.repeat(1000)));
  add(raw('pipelined requests', 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(5).replace(/\r\n\r\n$/, '\r\nConnection: close\r\n\r\n'), 200));
  add(
    raw(
      'request smuggling attempt',
      `POST ${CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin/state HTTP/1.1\r\nHost: x\r\n\r\n`,
      400,
    ),
  );
  add(
    raw(
      'unicode in a header',
      Buffer.concat([
        Buffer.from(`GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-U: `),
        Buffer.from('ünïcødé 💥', 'utf8'),
        Buffer.from('\r\n\r\n'),
      ]),
    ),
  );
  add(
    raw(
      'unicode in the path',
      Buffer.concat([Buffer.from('GET /v1/'), Buffer.from('模型', 'utf8'), Buffer.from(' HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')]),
      400,
    ),
  );
  add(raw('tab in the path', 'GET /v1/\tmodels HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 400));
  add(
    raw(
      'x-deadline-ms with CR',
      `POST ${CHAT} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nX-Deadline-Ms: 5\r0\r\nContent-Length: 2\r\n\r\n{}`,
      400,
    ),
  );
  add(
    raw(
      'authorization of raw bytes',
      Buffer.concat([
        Buffer.from(`POST ${CHAT} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nAuthorization: Bearer `),
        Buffer.from([0x80, 0xff, 0xfe]),
        Buffer.from(`\r\nContent-Length: ${JSON.stringify(user('hi')).length}\r\n\r\n${JSON.stringify(user('hi'))}`),
      ]),
    ),
  );
  return cases;
}
