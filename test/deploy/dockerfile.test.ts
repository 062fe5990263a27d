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
import { lintDockerfile, parseDockerfile, type LintContext } from './dockerfile-lint.js';
import { checkDeployConfig, REPO } from './render.js';

const read = (...p: string[]): string => readFileSync(join(REPO, ...p), 'utf8');

function context(): LintContext {
  const raw = parseYaml(read('deploy', 'kustomize', 'base', 'edge.yaml')) as Record<string, unknown>;
  // Only the addresses matter here; the rest is checked by kustomize.test.ts.
  const { config } = checkDeployConfig(raw);
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

  it('labels the runtime image with the OCI annotations, from build args where they vary per build', () => {
    const { stages } = parseDockerfile(dockerfile);
    const final = stages.at(-1)!;
    const labels = new Map<string, string>();
    for (const i of final.instructions.filter((x) => x.keyword === 'LABEL'))
      for (const [, k, v] of i.args.matchAll(/([\w.-]+)="([^"]*)"/g)) labels.set(k!, v!);
    const pkg = JSON.parse(read('package.json')) as { license: string; version: string };
    expect(labels.get('org.opencontainers.image.title')).toBe('awp-edge');
    expect(labels.get('org.opencontainers.image.licenses')).toBe(pkg.license);
    for (const [key, arg] of [
      ['version', 'VERSION'],
      ['revision', 'REVISION'],
      ['created', 'CREATED'],
      ['source', 'SOURCE'],
      ['base.name', 'NODE_IMAGE'],
    ] as const) {
      expect(labels.get(`org.opencontainers.image.${key}`), key).toBe(`\${${arg}}`);
      // The ARG is declared in the runtime stage (a global ARG is not visible after FROM without it).
      expect(
        final.instructions.some((i) => i.keyword === 'ARG' && i.args.split('=')[0] === arg),
        arg,
      ).toBe(true);
    }
    const versionArg = final.instructions.find((i) => i.keyword === 'ARG' && i.args.startsWith('VERSION='));
    expect(versionArg?.args).toBe(`VERSION=${pkg.version}`);
    expect(labels.get('org.opencontainers.image.description')?.length).toBeGreaterThan(10);
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
