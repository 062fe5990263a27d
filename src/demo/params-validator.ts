/**
 * Validates action params against the manifest's `params_schema` entries (AWP-ACT-002, AWP-MAN-002): local
 * `$ref`s resolve against the manifest's `$defs`, absolute ones against the vendored v0.1 schemas.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { loadSchemaFiles } from '../protocol/spec-data.js';
import type { JsonObject } from './types.js';

export class ParamsValidator {
  private readonly byType = new Map<string, ValidateFunction>();

  constructor(manifest: JsonObject) {
    // Receiver form: the vendored schemas' annotation keywords (x-awp-*) have no effect, so strict mode is off.
    const ajv = new Ajv2020({ strict: false, allErrors: false });
    for (const f of loadSchemaFiles()) ajv.addSchema(f.schema);
    const defs = manifest.$defs;
    for (const decl of manifest.action_schemas as JsonObject[]) {
      const schema = { ...(decl.params_schema as JsonObject), ...(defs !== undefined && { $defs: defs }) };
      this.byType.set(decl.type as string, ajv.compile(schema));
    }
  }

  /** The first problem with `params` for `type`, or undefined when they are valid. */
  problem(type: string, params: unknown): string | undefined {
    const fn = this.byType.get(type);
    if (fn === undefined) return `unknown action type ${type}`;
    if (fn(params)) return undefined;
    const e = fn.errors?.[0];
    return e === undefined
      ? 'invalid params'
      : `params${e.instancePath} ${e.message ?? `fails ${e.keyword}`}`;
  }
}
