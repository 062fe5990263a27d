/**
 * The published schema (src/config/edge.schema.json, shipped as dist/config/edge.schema.json) is the one the
 * loader validates with, every key is described, and every example config in the repository passes both the
 * schema (as an editor would check it) and the loader.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { format, resolveConfig } from 'prettier';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { EDGE_SCHEMA } from '../../src/config/edge-schema.js';
import { checkConfigFile, validateConfig } from '../../src/config/load.js';

const REPO = join(import.meta.dirname, '..', '..');
const SCHEMA_FILE = join(REPO, 'src', 'config', 'edge.schema.json');

/** Every edge config the repository shows a user: the deploy configs and README's configuration block. */
function exampleConfigs(): { name: string; text: string }[] {
  const deploy = ['deploy/kustomize/base/edge.yaml', 'deploy/kustomize/overlays/multi/edge.yaml'].map(
    (f) => ({
      name: f,
      text: readFileSync(join(REPO, f), 'utf8'),
    }),
  );
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Configuration\n'));
  const block = /```yaml\n([\s\S]*?)```/.exec(section.slice(0, section.indexOf('\n## ', 5)));
  if (block === null) throw new Error('README has no yaml block under "## Configuration"');
  return [...deploy, { name: 'README.md (Configuration)', text: block[1]! }];
}

/** Names every `*_env` variable a config refers to, so the loader can be given all of them. */
function envNames(v: unknown): string[] {
  if (Array.isArray(v)) return v.flatMap(envNames);
  if (typeof v !== 'object' || v === null) return [];
  return Object.entries(v).flatMap(([k, x]) =>
    k.endsWith('_env') && typeof x === 'string' ? [x] : envNames(x),
  );
}

describe('edge.schema.json', () => {
  it('is EDGE_SCHEMA written out (regenerate with `npx vitest run test/config -u`)', async () => {
    // Formatted as `prettier --check .` (npm run lint) wants it.
    const options = await resolveConfig(SCHEMA_FILE);
    const text = await format(JSON.stringify(EDGE_SCHEMA, null, 2), { ...options, filepath: SCHEMA_FILE });
    await expect(text).toMatchFileSnapshot(SCHEMA_FILE);
  });

  it('describes every key and closes every mapping', () => {
    const walk = (node: Record<string, unknown>, at: string): string[] => {
      const missing: string[] = [];
      if (typeof node.description !== 'string' || node.description === '') missing.push(`${at}: description`);
      if (node.type === 'object' && node.additionalProperties !== false)
        missing.push(`${at}: additionalProperties`);
      for (const [k, child] of Object.entries(
        (node.properties ?? {}) as Record<string, Record<string, unknown>>,
      ))
        missing.push(...walk(child, `${at}.${k}`));
      const items = node.items as Record<string, unknown> | undefined;
      if (items?.type === 'object') missing.push(...walk(items, `${at}[]`));
      return missing;
    };
    expect(walk(EDGE_SCHEMA, '(top)')).toEqual([]);
  });

  const published = JSON.parse(readFileSync(SCHEMA_FILE, 'utf8')) as Record<string, unknown>;
  // As an editor would use it: the file alone, our x- annotations unknown to the validator.
  const editor = new Ajv({ allErrors: true, strict: false }).compile(published);

  for (const example of exampleConfigs()) {
    it(`${example.name}: names the schema for editors, passes the schema and the loader`, () => {
      expect(example.text).toMatch(/^# yaml-language-server: \$schema=\S*edge\.schema\.json$/m);
      const raw = parseYaml(example.text) as unknown;
      expect(editor(raw), JSON.stringify(editor.errors)).toBe(true);
      const env = Object.fromEntries(
        envNames(raw).map((n) => [n, n.includes('REDIS') ? 'redis://r:6379' : 'tok']),
      );
      // Certificate files exist only where the edge is deployed: checked without them here. Credential
      // files (the deploy configs' *_file) too: as check-config does, absent ones are run-time requirements.
      const withoutFiles = { ...(raw as Record<string, unknown>), tls: undefined, webtransport: undefined };
      const dir = mkdtempSync(join(tmpdir(), 'awp-edge-schema-'));
      try {
        writeFileSync(join(dir, 'edge.yaml'), JSON.stringify(withoutFiles));
        expect(checkConfigFile(join(dir, 'edge.yaml'), env).config.routes.length).toBeGreaterThan(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  it('refuses what the loader refuses for shape: an unknown key, a value out of range, a missing route', () => {
    for (const bad of [
      { routes: [{ upstream: 'ws://w/' }], lisen: '127.0.0.1:1' },
      { routes: [{ upstream: 'ws://w/' }], transport: { max_json_depth: 4 } },
      { routes: [{ upstream: 'ws://w/', allowed_origins: ['https://a.example/path'] }] },
      { routes: [] },
      {},
    ]) {
      expect(editor(bad), JSON.stringify(bad)).toBe(false);
      expect(() => validateConfig(bad, 'test', { AWP_EDGE_AGENT_TOKENS: 't' })).toThrow();
    }
  });
});
