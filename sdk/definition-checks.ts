// What makes a default export a strategy definition, and whether its `sdk`
// range accepts this SDK. The router's plugin loader and the test kit's
// conformance suite ask the same questions, so they share this file.
import semver from 'semver';
import { SDK_VERSION, type StrategyDefinition } from './types.ts';

/** Registry names: what a policy's strategy chain refers to. */
const NAME = /^[a-z0-9][a-z0-9._-]*$/i;

/**
 * Problems with a would-be strategy definition, as sentences naming the
 * field; empty when `value` has the shape `{ name, version, sdk, create }`.
 */
export function definitionProblems(value: unknown): string[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    const what = value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
    return [`the default export is ${what}, not a strategy definition { name, version, sdk, create }`];
  }
  const d = value as Record<string, unknown>;
  const problems: string[] = [];
  if (typeof d.name !== 'string' || !NAME.test(d.name)) {
    problems.push(`"name" must be a registry name like "least-kv" (letters, digits, . _ -), not ${show(d.name)}`);
  }
  if (typeof d.version !== 'string' || d.version.length === 0) problems.push(`"version" must be a string like "1.0.0", not ${show(d.version)}`);
  if (typeof d.sdk !== 'string' || semver.validRange(d.sdk) === null) {
    problems.push(`"sdk" must be a semver range of SDK versions like "^1", not ${show(d.sdk)}`);
  }
  if (typeof d.create !== 'function') problems.push(`"create" must be a function (config, ctx) => instance, not ${show(d.create)}`);
  if (d.configSchema !== undefined && (d.configSchema === null || typeof d.configSchema !== 'object' || Array.isArray(d.configSchema))) {
    problems.push(`"configSchema" must be a JSON Schema object when given, not ${show(d.configSchema)}`);
  }
  return problems;
}

/** Undefined when the definition's `sdk` range accepts `sdkVersion`, else why not. */
export function sdkRangeProblem(definition: Pick<StrategyDefinition, 'name' | 'sdk'>, sdkVersion: string = SDK_VERSION): string | undefined {
  if (semver.satisfies(sdkVersion, definition.sdk)) return undefined;
  return `strategy "${definition.name}" supports SDK ${definition.sdk}, but this router provides SDK ${sdkVersion}`;
}

function show(value: unknown): string {
  if (value === undefined) return 'missing';
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === null || typeof value !== 'object') return String(value);
  return Array.isArray(value) ? 'an array' : 'an object';
}
