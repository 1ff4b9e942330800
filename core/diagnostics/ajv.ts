// One ajv for policy documents, plugin configs and workloads: defaults are
// filled in, every error reported, and each schema compiled once.
import { Ajv } from 'ajv';

export const ajv = new Ajv({ allErrors: true, useDefaults: true, verbose: true, strict: false });
