/** Renders a kustomize overlay with kubectl (no cluster needed) and parses the objects. */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { checkConfigFile } from '../../src/config/load.js';
import type { EdgeConfig } from '../../src/config/schema.js';
import type { K8sObject } from './k8s-validate.js';

export const KUBECTL = process.env.AWP_TEST_KUBECTL ?? '/usr/bin/kubectl';
export const REPO = join(import.meta.dirname, '..', '..');
export const KUSTOMIZE_DIR = join(REPO, 'deploy', 'kustomize');

export function kubectlAvailable(): boolean {
  return existsSync(KUBECTL);
}

export function renderOverlay(overlay: string): K8sObject[] {
  const out = execFileSync(KUBECTL, ['kustomize', join(KUSTOMIZE_DIR, 'overlays', overlay)], {
    encoding: 'utf8',
    timeout: 60_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const docs = parseAllDocuments(out);
  const objects: K8sObject[] = [];
  for (const doc of docs) {
    if ('errors' in doc && doc.errors.length > 0)
      throw new Error(`${overlay}: ${doc.errors.map(String).join('; ')}`);
    const obj = doc.toJS() as unknown;
    if (obj !== null) objects.push(obj as K8sObject);
  }
  return objects;
}

/**
 * A deploy edge.yaml through the edge's own `check-config` path: credential files and variables that exist
 * only in the pod are listed in `runtime` (as `check-config` without `--strict` does), not refused.
 */
export function checkDeployConfig(
  raw: unknown,
  env: Record<string, string> = {},
): { config: EdgeConfig; runtime: readonly string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'awp-edge-deploy-'));
  try {
    const file = join(dir, 'edge.yaml');
    writeFileSync(file, JSON.stringify(raw));
    return checkConfigFile(file, env);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
