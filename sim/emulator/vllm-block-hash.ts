// Block hashes as vLLM computes them (vllm/v1/core/kv_cache_utils.py):
// block j's hash is SHA-256 over (block j-1's hash, block j's token ids,
// its extra keys such as the LoRA name), chained from a root that is random
// per process (os.urandom) unless a seed is given (PYTHONHASHSEED). vLLM
// pickles the tuple first; this encodes it plainly, which changes nothing a
// subscriber can see: the digests are as unpredictable without the root.
// Published as vLLM does: the digest's last 8 bytes as an unsigned integer
// (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, the default) or the digest itself.
import { createHash, randomBytes } from 'node:crypto';

export type PublishedHash = bigint | Uint8Array;

export class VllmBlockHasher {
  private readonly root: Buffer;

  constructor(
    seed: string | undefined,
    readonly form: 'int' | 'bytes' = 'int',
  ) {
    this.root = seed === undefined ? randomBytes(32) : createHash('sha256').update(`switchyard-emulator:${seed}`).digest();
  }

  /** The digests of each full block of `ids`, chained, with the adapter as an extra key. */
  digests(ids: ArrayLike<number>, blockSize: number, adapter: string | undefined): Buffer[] {
    const out: Buffer[] = [];
    const blocks = Math.floor(ids.length / blockSize);
    const tokens = Buffer.alloc(blockSize * 4);
    const extra = adapter === undefined ? undefined : Buffer.from(`lora:${adapter}`);
    let parent = this.root;
    for (let j = 0; j < blocks; j++) {
      for (let t = 0; t < blockSize; t++) tokens.writeUInt32LE(ids[j * blockSize + t] >>> 0, t * 4);
      const hash = createHash('sha256').update(parent).update(tokens);
      if (extra) hash.update(extra);
      parent = hash.digest();
      out.push(parent);
    }
    return out;
  }

  /** A digest as the events carry it. */
  published(digest: Buffer): PublishedHash {
    return this.form === 'int' ? digest.readBigUInt64BE(digest.length - 8) : new Uint8Array(digest);
  }
}
