// Validates a strategy's config from policy against the plugin's own
// configSchema, filling in its defaults.
import type { ValidateFunction } from 'ajv';
import { ajv } from '../policy/schemas.ts';
import type { AnyStrategy } from './registry.ts';

const compiled = new WeakMap<object, ValidateFunction>();

export function configValidator(definition: AnyStrategy): ValidateFunction | undefined {
  const schema = definition.configSchema;
  if (!schema) return undefined;
  let validate = compiled.get(schema);
  if (!validate) {
    // A plugin's $id must not clash with another plugin's in the shared ajv.
    const { $id: _ignored, ...rest } = schema as { $id?: string };
    validate = ajv.compile(rest);
    compiled.set(schema, validate);
  }
  return validate;
}
