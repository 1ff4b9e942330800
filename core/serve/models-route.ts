// GET /v1/models: the aliases, models and adapters the caller's tenant may
// use, in OpenAI's list shape (adapters carry `parent`, as vLLM lists them).
import { firstAllowed } from '../decide/model.ts';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { resolveTenant } from '../decide/decide.ts';
import { errorBody } from '../errors.ts';
import { sha256Hex } from '../facts/request-facts.ts';
import type { Generation, Tenant } from '../decide/generation.ts';
import { rejectionHeaders } from './rejections.ts';

interface ModelCard {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  parent?: string;
  /** As vLLM lists it: the longest prompt plus output any pool of the model takes. */
  max_model_len?: number;
  switchyard?: Record<string, unknown>;
}

/** When this router started: what `created` says (vLLM's is its own start time too). */
const STARTED_S = Math.floor(Date.now() / 1000);

/** { max_model_len }: the largest of the model's pools; nothing when no pool sets one. */
function lengthOf(snapshot: Generation, model: string): { max_model_len?: number } {
  let max: number | undefined;
  for (const pool of snapshot.pools) if (pool.model === model && pool.maxModelLen !== undefined) max = Math.max(max ?? 0, pool.maxModelLen);
  return max === undefined ? {} : { max_model_len: max };
}

export function listModels(snapshot: Generation, tenant: Tenant): ModelCard[] {
  const created = STARTED_S;
  const allowed = (id: string) => !tenant.allowedModels || tenant.allowedModels.has(id);
  const cards: ModelCard[] = [];
  for (const model of snapshot.models.values()) {
    if (!allowed(model.id)) continue;
    cards.push({
      id: model.id,
      object: 'model',
      created,
      owned_by: 'switchyard',
      ...lengthOf(snapshot, model.id),
      switchyard: model.cold ? { kind: 'model', cold: true } : { kind: 'model', versions: model.versions.map((v) => v.version) },
    });
  }
  for (const alias of snapshot.aliases.values()) {
    if (alias.model !== undefined) {
      if (allowed(alias.model))
        cards.push({
          id: alias.name,
          object: 'model',
          created,
          owned_by: 'switchyard',
          ...lengthOf(snapshot, alias.model),
          switchyard: { kind: 'alias', model: alias.model },
        });
    } else if (firstAllowed(tenant, alias.cascade.models) !== undefined) {
      cards.push({ id: alias.name, object: 'model', created, owned_by: 'switchyard', switchyard: { kind: 'cascade', cascade: alias.cascade.name } });
    }
  }
  for (const adapter of tenant.adapters.values()) {
    cards.push({ id: adapter.name, object: 'model', created, owned_by: tenant.id, parent: adapter.model, switchyard: { kind: 'adapter' } });
  }
  return cards;
}

/**
 * The list, serialized once per tenant and policy snapshot: a flood of
 * GET /v1/models costs a map lookup each, not a list and a JSON.stringify.
 */
export function modelsHandler(current: () => Generation) {
  let cachedFor: Generation | undefined;
  const cache = new Map<string, string>();
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const snapshot = current();
    const key = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')?.[1];
    const who = resolveTenant(snapshot, key === undefined ? undefined : sha256Hex(key));
    if (!who.ok) return reply.code(who.rejection.status).headers(rejectionHeaders(who.rejection, request.id)).send(errorBody(who.rejection));
    const tenant = who.value;
    if (cachedFor !== snapshot) {
      cachedFor = snapshot;
      cache.clear();
    }
    let text = cache.get(tenant.id);
    if (text === undefined) cache.set(tenant.id, (text = JSON.stringify({ object: 'list', data: listModels(snapshot, tenant) })));
    return reply.type('application/json; charset=utf-8').send(text);
  };
}
