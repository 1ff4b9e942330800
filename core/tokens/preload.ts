// The policy's tokenizer folders, loaded as `serve` starts rather than on the
// first request for each model: until a folder has loaded, every prompt of its
// models goes on with the estimate (`loading`), so the first seconds of traffic
// would be routed on guesses and match nothing in the KV index. /readyz waits
// for them (at most `maxWaitMs`: a folder that fails or hangs leaves the
// estimate serving, and the router ready, docs/tokens.md).
import type { Logger } from '../../sdk/index.ts';
import type { Generation } from '../decide/generation.ts';
import { ENGINE_TOKENIZER } from './defaults.ts';
import { TokenizerService } from './service.ts';

export interface TokenizerPreload {
  /** True once every folder has loaded or failed, or `maxWaitMs` has passed. */
  ready(): boolean;
  /** Resolves when ready() turns true. */
  readonly done: Promise<void>;
}

/** The distinct tokenizer folders of the policy's models (`tokenizer: engine` asks a replica: nothing to load). */
export function tokenizerFolders(snapshot: Generation): string[] {
  const folders = new Set<string>();
  for (const model of snapshot.models.values()) if (model.tokenizer !== undefined && model.tokenizer !== ENGINE_TOKENIZER) folders.add(model.tokenizer);
  return [...folders];
}

export function preloadTokenizers(snapshot: Generation, options: { maxWaitMs: number; log: Logger; service?: TokenizerService }): TokenizerPreload {
  const folders = tokenizerFolders(snapshot);
  if (folders.length === 0) return { ready: () => true, done: Promise.resolve() };
  const service = options.service ?? TokenizerService.shared();
  const started = performance.now();
  let ready = false;
  let timer: NodeJS.Timeout | undefined;
  const loaded = Promise.all(
    folders.map((dir) =>
      service.load(dir).then((error) => {
        if (error) options.log.warn('a tokenizer folder failed to load: its models are counted by the estimate', { folder: dir, error });
      }),
    ),
  ).then(() => options.log.info('tokenizers loaded', { folders: folders.length, ms: Math.round(performance.now() - started) }));
  const waited = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      if (!ready)
        options.log.warn('tokenizers still loading: ready anyway, their models are counted by the estimate until they load', { maxWaitMs: options.maxWaitMs });
      resolve();
    }, options.maxWaitMs);
    timer.unref();
  });
  const done = Promise.race([loaded, waited]).then(() => {
    ready = true;
    clearTimeout(timer);
  });
  return { ready: () => ready, done };
}
