// The facts rules see, with their types: what `validate` checks a rule's
// operator and value against (docs/policies.md lists them for people).
// Pool-rule-only facts are null while cascades run, so a cascade may not ask them.
import { BODY_SCHEMAS } from '../facts/request-schemas.ts';

export type FactType =
  | { readonly kind: 'number' }
  | { readonly kind: 'string'; readonly nullable?: boolean }
  | { readonly kind: 'enum'; readonly values: readonly string[] }
  | { readonly kind: 'boolean' }
  /** The prompt's text: only the text operators (containsAny, matches) apply. */
  | { readonly kind: 'text' };

export interface RuleFact {
  readonly type: FactType;
  /** Known only once the model is chosen: pool rules may ask, cascades may not. */
  readonly poolRulesOnly?: boolean;
}

export const RULE_FACTS: Readonly<Record<string, RuleFact>> = {
  model: { type: { kind: 'string' } },
  resolvedModel: { type: { kind: 'string', nullable: true }, poolRulesOnly: true },
  version: { type: { kind: 'string', nullable: true }, poolRulesOnly: true },
  canary: { type: { kind: 'boolean' }, poolRulesOnly: true },
  adapter: { type: { kind: 'string', nullable: true }, poolRulesOnly: true },
  promptTokens: { type: { kind: 'number' } },
  maxTokens: { type: { kind: 'number' } },
  messageCount: { type: { kind: 'number' } },
  hasCode: { type: { kind: 'boolean' } },
  prompt: { type: { kind: 'text' } },
  tenant: { type: { kind: 'string' } },
  tenantTier: { type: { kind: 'string' } },
  priority: { type: { kind: 'enum', values: ['interactive', 'batch'] } },
  /** The integer behind `priority` (x-priority, capped by the tenant): negative is sheddable. */
  priorityLevel: { type: { kind: 'number' } },
  hasConversation: { type: { kind: 'boolean' } },
  stream: { type: { kind: 'boolean' } },
  endpoint: { type: { kind: 'enum', values: Object.keys(BODY_SCHEMAS) } },
};
