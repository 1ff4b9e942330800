// Validates a strategy's config from policy against the plugin's own
// configSchema, filling in its defaults.
import type { ValidateFunction } from 'ajv';
import { oncePer } from '../once-per.ts';
import type { AnyStrategy } from './registry.ts';
import { ajv } from '../diagnostics/ajv.ts';

const compiled = oncePer((schema: object): ValidateFunction => {
  // A plugin's $id must not clash with another plugin's in the shared ajv.
  const { $id: _ignored, ...rest } = schema as { $id?: string };
  return ajv.compile(rest);
});

export function configValidator(definition: AnyStrategy): ValidateFunction | undefined {
  const schema = definition.configSchema;
  return schema ? compiled(schema) : undefined;
}
