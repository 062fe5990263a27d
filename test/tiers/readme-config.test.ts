/**
 * README "Edges in front of edges": the configurations it shows for a tier and for the tier below it are
 * valid configs (`awp-edge check-config`), their secrets listed as needed at run time, and the tier below
 * sets at least the budgets the three-tier tests run with (TIER_BUDGETS).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkConfigFile } from '../../src/config/load.js';
import { TIER_BUDGETS } from './rig.js';

const REPO = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'awp-edge-tiers-readme-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function blocks(): string[] {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const start = readme.indexOf('\n## Edges in front of edges\n');
  expect(start, 'README has the section').toBeGreaterThan(0);
  const section = readme.slice(start, readme.indexOf('\n## ', start + 5));
  return [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

describe('README: the configuration of a tier', () => {
  it('the tier and the tier below check, their credentials needed at run time', () => {
    const [tier, below] = blocks();
    expect(below).toBeDefined();
    const checked = [tier!, below!].map((text, i) => {
      const file = join(dir, `tier-${i}.yaml`);
      writeFileSync(file, text);
      return checkConfigFile(file, {});
    });
    expect(checked[0]!.config.routes[0]!.upstream).toBe('wss://edge-c.example.com/worlds/arm');
    expect(checked[0]!.runtime.map((r) => r.split(':')[0])).toContain('routes[0].upstream_token_file');
    expect(checked[0]!.config.store.kind).toBe('redis');
    const budgets = checked[1]!.config.budgets;
    for (const [k, v] of Object.entries(TIER_BUDGETS))
      expect(budgets[k as keyof typeof budgets], k).toBeGreaterThanOrEqual(v);
    expect(checked[1]!.config.transport.max_pending_handshakes_per_address).toBeGreaterThanOrEqual(64);
  });
});
