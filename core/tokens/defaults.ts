// Names and defaults that the policy compiler and the request path share (docs/tokens.md).

/**
 * `tokenizer: engine` in models.yaml: the compiled model's tokenizer is this
 * marker instead of a folder path. Compiled folder paths are absolute, so the
 * marker never names a folder (a folder called "engine" next to the file is
 * written `./engine`).
 */
export const ENGINE_TOKENIZER = 'engine';

/** settings tokenize_wait_ms: how long a request waits for its prompt's count before it goes on with the estimate. */
export const DEFAULT_TOKENIZE_WAIT_MS = 20;

/**
 * The same, unset, for a model whose replicas publish KV events: a prompt left
 * estimated has no token ids, so the KV index cannot match it, and a cold
 * document of a few thousand tokens takes more than 20 ms to encode on a busy
 * machine. Waiting for it costs far less than the prefill a miss costs.
 */
export const DEFAULT_KV_TOKENIZE_WAIT_MS = 200;
