// Reading a replica's answer to POST /tokenize (vLLM's TokenizeResponse:
// {"count", "max_model_len", "tokens": [ids], "token_strs": null}) as its
// bytes arrive, chunk by chunk, so a long prompt's ids never cost one big
// JSON.parse on the router's event loop. Hostile by default: anything but a
// flat object of numbers, null, strings and one array of ids is refused, as
// are ids outside 0..2^32-1, more ids than `maxIds`, and a `count` that does
// not match the ids.

export class TokenizeResponseError extends Error {}

const enum State {
  Start,
  Key,
  Colon,
  Value,
  AfterValue,
  Ids,
  AfterId,
  Done,
}

export class TokenizeResponseReader {
  #state = State.Start;
  #ids: Uint32Array;
  #n = 0;
  /** The token being read across chunk boundaries: a key, a number, a literal or a string value. */
  #token = '';
  #inString = false;
  #escaped = false;
  #key = '';
  #count?: number;
  #sawTokens = false;
  readonly #maxIds: number;

  constructor(maxIds: number) {
    this.#maxIds = maxIds;
    this.#ids = new Uint32Array(Math.min(maxIds, 4096));
  }

  /** Feeds the next chunk of the body (UTF-8; every byte that matters is ASCII). */
  push(chunk: string): void {
    for (let i = 0; i < chunk.length; i++) this.#char(chunk.charCodeAt(i));
  }

  /** The ids, once the whole body was pushed. Throws TokenizeResponseError on anything else. */
  end(): Uint32Array {
    if (this.#state !== State.Done) throw new TokenizeResponseError('the answer ends early: not a whole JSON object');
    if (!this.#sawTokens) throw new TokenizeResponseError('the answer has no "tokens" array');
    if (this.#count !== undefined && this.#count !== this.#n) throw new TokenizeResponseError(`"count" is ${this.#count} but "tokens" holds ${this.#n} ids`);
    return this.#ids.slice(0, this.#n);
  }

  #fail(what: string): never {
    throw new TokenizeResponseError(`the answer is not vLLM's TokenizeResponse: ${what}`);
  }

  #char(c: number): void {
    if (this.#inString) {
      if (this.#token.length > 256) this.#fail('a string over 256 characters');
      if (this.#escaped) this.#escaped = false;
      else if (c === 0x5c) this.#escaped = true;
      else if (c === 0x22) {
        this.#inString = false;
        return this.#endString();
      }
      this.#token += String.fromCharCode(c);
      return;
    }
    const space = c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
    switch (this.#state) {
      case State.Start:
        if (space) return;
        if (c !== 0x7b) this.#fail('it does not start with "{"');
        this.#state = State.Key;
        return;
      case State.Key:
        if (space) return;
        if (c === 0x7d && this.#key === '') return void (this.#state = State.Done);
        if (c !== 0x22) this.#fail('a key is not a string');
        this.#inString = true;
        this.#token = '';
        return;
      case State.Colon:
        if (space) return;
        if (c !== 0x3a) this.#fail('no ":" after a key');
        this.#state = State.Value;
        this.#token = '';
        return;
      case State.Value:
        if (this.#token === '' && space) return;
        if (this.#token === '' && c === 0x5b) {
          if (this.#key === 'tokens') {
            if (this.#sawTokens) this.#fail('"tokens" twice');
            this.#sawTokens = true;
            this.#state = State.Ids;
            return;
          }
          if (this.#key === 'token_strs') this.#fail('"token_strs" was not asked for');
          this.#fail(`"${this.#key}" is an array`);
        }
        if (this.#token === '' && c === 0x22) {
          this.#inString = true;
          return;
        }
        if (c === 0x2c || c === 0x7d || space) {
          this.#scalar(this.#token);
          this.#state = State.AfterValue;
          return this.#char(c);
        }
        if (this.#token.length > 32) this.#fail('a value over 32 characters');
        this.#token += String.fromCharCode(c);
        return;
      case State.AfterValue:
        if (space) return;
        if (c === 0x2c) {
          this.#state = State.Key;
          this.#key = '';
          return;
        }
        if (c === 0x7d) return void (this.#state = State.Done);
        this.#fail('values are not separated by ","');
        return;
      case State.Ids:
      case State.AfterId:
        return this.#idChar(c, space);
      case State.Done:
        if (!space) this.#fail('bytes after the object');
        return;
    }
  }

  #endString(): void {
    if (this.#state === State.Key) {
      this.#key = this.#token;
      this.#token = '';
      this.#state = State.Colon;
      return;
    }
    // A string value (a field vLLM may add): skipped.
    this.#token = '';
    this.#state = State.AfterValue;
  }

  #scalar(text: string): void {
    if (this.#key === 'count') {
      if (!/^\d{1,10}$/.test(text)) this.#fail('"count" is not a whole number');
      this.#count = Number(text);
      return;
    }
    if (this.#key === 'tokens') this.#fail('"tokens" is not an array');
    if (text !== 'null' && text !== 'true' && text !== 'false' && !/^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(text))
      this.#fail(`"${this.#key}" holds ${JSON.stringify(text.slice(0, 20))}`);
  }

  #idChar(c: number, space: boolean): void {
    const digit = c >= 0x30 && c <= 0x39;
    if (digit) {
      if (this.#state === State.AfterId && this.#token === '') this.#fail('two ids without a ","');
      if (this.#token.length >= 10) this.#fail('an id over 10 digits');
      this.#token += String.fromCharCode(c);
      return;
    }
    if (this.#token !== '') this.#pushId();
    if (space) return;
    if (c === 0x2c) {
      if (this.#state !== State.AfterId) this.#fail('"," without an id before it');
      this.#state = State.Ids;
      return;
    }
    if (c === 0x5d) {
      if (this.#state === State.Ids && this.#n > 0) this.#fail('"," before "]"');
      this.#state = State.AfterValue;
      return;
    }
    this.#fail('"tokens" holds something other than whole numbers');
  }

  #pushId(): void {
    if (this.#state === State.AfterId) this.#fail('two ids without a ","');
    const id = Number(this.#token);
    this.#token = '';
    if (id > 0xffffffff) this.#fail('an id over 2^32');
    if (this.#n >= this.#maxIds) this.#fail(`more than ${this.#maxIds} ids`);
    if (this.#n === this.#ids.length) {
      const grown = new Uint32Array(Math.min(this.#maxIds, this.#ids.length * 2));
      grown.set(this.#ids);
      this.#ids = grown;
    }
    this.#ids[this.#n++] = id;
    this.#state = State.AfterId;
  }
}
