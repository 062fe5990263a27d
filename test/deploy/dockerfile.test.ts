/**
 * Lints deploy/Dockerfile offline with the rules in dockerfile-lint.ts, cross-checked against the
 * base edge.yaml (ports), the Deployment (config mount and args) and package.json (bin); and proves
 * each rule fires on a Dockerfile that breaks it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import type { IDeployment } from 'kubernetes-models/apps/v1';
import { validateConfig } from '../../src/config/load.js';
import { lintDockerfile, parseDockerfile, type LintContext } from './dockerfile-lint.js';
import { REPO } from './render.js';

const read = (...p: string[]): string => readFileSync(join(REPO, ...p), 'utf8');

function context(): LintContext {
  const raw = parseYaml(read('deploy', 'kustomize', 'base', 'edge.yaml')) as Record<string, unknown>;
  // Only the addresses matter here; store/drain are checked by kustomize.test.ts.
  const { store: _store, drain: _drain, ...known } = raw;
  const config = validateConfig(known, 'edge.yaml', {
    AWP_EDGE_AGENT_TOKENS: 'a',
    AWP_EDGE_UPSTREAM_TOKEN: 'b',
  });
  const deployment = parseYaml(read('deploy', 'kustomize', 'base', 'deployment.yaml')) as IDeployment;
  const container = deployment.spec!.template.spec!.containers[0]!;
  const mount = container.volumeMounts!.find((m) => m.name === 'config')!;
  const pkg = JSON.parse(read('package.json')) as { bin: Record<string, string> };
  return {
    repo: REPO,
    agentPort: config.listen.port,
    adminPort: config.admin.port,
    bin: pkg.bin['awp-edge']!,
    configPath: `${mount.mountPath}/edge.yaml`,
    dockerignore: read('.dockerignore'),
  };
}

describe('deploy/Dockerfile lint', () => {
  const ctx = context();
  const dockerfile = read('deploy', 'Dockerfile');

  it('passes every rule', () => {
    expect(lintDockerfile(dockerfile, ctx)).toEqual([]);
  });

  it('the Deployment runs the image with the same command as its CMD', () => {
    const deployment = parseYaml(read('deploy', 'kustomize', 'base', 'deployment.yaml')) as IDeployment;
    const { stages } = parseDockerfile(dockerfile);
    const cmd = stages.at(-1)!.instructions.find((i) => i.keyword === 'CMD')!;
    expect(deployment.spec!.template.spec!.containers[0]!.args).toEqual(JSON.parse(cmd.args));
  });

  it('is multi-stage: dev dependencies and sources stay out of the runtime stage', () => {
    const { stages } = parseDockerfile(dockerfile);
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const final = stages.at(-1)!;
    const copies = final.instructions.filter((i) => i.keyword === 'COPY').map((i) => i.args);
    expect(copies.some((c) => /\bsrc\b/.test(c) && !c.includes('--from='))).toBe(false);
    expect(final.instructions.some((i) => i.keyword === 'RUN' && /npm (ci|run)/.test(i.args))).toBe(false);
  });

  it('each rule fires on a Dockerfile that breaks it', () => {
    const bad = [
      'ARG NODE_IMAGE=node:24-bookworm-slim',
      'ARG NPM_TOKEN=abc',
      'FROM ${NODE_IMAGE} AS build',
      'ADD https://example.com/tool.tar.gz /tmp/',
      'COPY missing.json ./',
      'RUN npm install && \\',
      '    npm run build',
      'FROM node:latest',
      'ENV REGISTRY=https://user:pw@registry.example.com',
      'COPY --from=build /src/node_modules ./node_modules',
      'EXPOSE 8080',
      'ENTRYPOINT node dist/cli/awp-edge.js',
      'USER root',
    ].join('\n');
    const rules = lintDockerfile(bad, ctx).map((p) => p.split(':')[0]);
    expect(new Set(rules)).toEqual(
      new Set([
        'pinned-base',
        'glibc-base',
        'non-root',
        'healthcheck',
        'expose',
        'no-remote-add',
        'no-secret-env',
        'npm-ci',
        'prod-deps',
        'exec-form',
        'copy-context',
      ]),
    );
  });
});
