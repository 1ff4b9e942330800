// The built-in strategies as a registry, handed to core the way cli/ does
// (core never imports plugins/), for tests that build policies from texts.
import { registryOf } from '../../core/plugins/registry.ts';
import { BUILTIN_STRATEGIES } from '../../plugins/index.ts';

export const builtinRegistry = registryOf(BUILTIN_STRATEGIES);
