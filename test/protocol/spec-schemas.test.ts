import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SCHEMA_DOCUMENTS } from '../../src/protocol/spec-schemas.js';
import { specDir } from '../harness/spec-data.js';

/** Every `*.schema.json` under schemas/v0.1, relative, with `/` separators, sorted. */
function schemaFilesOnDisk(): string[] {
  const base = join(specDir(), 'schemas', 'v0.1');
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.schema.json')) out.push(relative(base, path).split('\\').join('/'));
    }
  };
  walk(base);
  return out.sort();
}

describe('the vendored schema index (src/protocol/spec-schemas.ts)', () => {
  it('lists every schema file of the vendored folder, once, sorted by path', () => {
    expect(SCHEMA_DOCUMENTS.map(([file]) => file)).toEqual(schemaFilesOnDisk());
  });

  it('pairs each file with its own document (its $id ends with the file path)', () => {
    for (const [file, doc] of SCHEMA_DOCUMENTS) {
      expect((doc as { $id?: unknown }).$id).toBe(`https://agentworldprotocol.com/schemas/v0.1/${file}`);
    }
  });
});
