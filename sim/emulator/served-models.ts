// The names a replica answers to: its base model and the LoRA adapters
// registered with it (vLLM's --lora-modules and /v1/load_lora_adapter). A
// request picks an adapter by naming it in `model`. Registering an adapter
// does not put it in a GPU slot: the engine loads it when a request needs it.
import { EmulatorError, badRequest, modelNotFound } from './errors.ts';

export interface ServedModelsOptions {
  readonly servedModelName: string;
  /** The model path vLLM reports as `root`. */
  readonly modelPath: string;
  readonly maxModelLen: number;
  /** `owned_by` in /v1/models: the engine's name. */
  readonly ownedBy: string;
}

export class ServedModels {
  private readonly options: ServedModelsOptions;
  private readonly adapters = new Map<string, string>();
  private readonly created = Math.floor(Date.now() / 1000);

  constructor(options: ServedModelsOptions) {
    this.options = options;
  }

  get baseName(): string {
    return this.options.servedModelName;
  }

  /** The adapter a `model` field selects: undefined for the base model; 404 for an unknown name. */
  resolve(model: string | undefined): string | undefined {
    if (model === undefined || model === this.options.servedModelName) return undefined;
    if (this.adapters.has(model)) return model;
    throw modelNotFound(model);
  }

  register(name: string, path: string): void {
    if (name === this.options.servedModelName) throw badRequest(`'${name}' is the base model's name`, 'lora_name');
    if (this.adapters.has(name)) throw badRequest(`The lora adapter '${name}' has already been loaded.`, 'lora_name');
    this.adapters.set(name, path);
  }

  unregister(name: string): void {
    if (!this.adapters.delete(name)) throw new EmulatorError('NotFoundError', `The lora adapter '${name}' cannot be found.`, 'lora_name');
  }

  /** The /v1/models body: the base model, then each adapter with its `parent`. */
  list(): object {
    const { servedModelName, modelPath, maxModelLen, ownedBy } = this.options;
    const entry = (id: string, root: string, parent: string | null, maxLen: number | null) => ({
      id,
      object: 'model',
      created: this.created,
      owned_by: ownedBy,
      root,
      parent,
      max_model_len: maxLen,
    });
    return {
      object: 'list',
      data: [entry(servedModelName, modelPath, null, maxModelLen), ...[...this.adapters].map(([name, path]) => entry(name, path, servedModelName, null))],
    };
  }
}
