/** Address helpers (no I/O) and `check-config` without the secrets the config names. */
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isLoopback, normaliseOrigin, parseAddress } from '../../src/config/address.js';
import { checkConfigFile, ConfigError } from '../../src/config/load.js';

const REPO = join(import.meta.dirname, '..', '..');

describe('address helpers', () => {
  it('parseAddress: HOST:PORT with a name, IPv4 or [IPv6] host', () => {
    expect(parseAddress('127.0.0.1:8720')).toEqual({ host: '127.0.0.1', port: 8720 });
    expect(parseAddress('[::1]:0')).toEqual({ host: '::1', port: 0 });
    expect(parseAddress('edge.example:65535')).toEqual({ host: 'edge.example', port: 65535 });
    for (const bad of ['localhost', 'a:65536', ':80', 'a b:80', '[::1]', 'a:-1'])
      expect(parseAddress(bad), bad).toBeUndefined();
  });

  it('isLoopback', () => {
    for (const h of ['localhost', '::1', '127.0.0.1', '127.1.2.3']) expect(isLoopback(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', 'edge.example', '128.0.0.1'])
      expect(isLoopback(h), h).toBe(false);
  });

  it('normaliseOrigin: the form a browser sends, for string comparison', () => {
    expect(normaliseOrigin('HTTP://LOCALHOST:8720/')).toBe('http://localhost:8720');
    expect(normaliseOrigin('https://a.example:443')).toBe('https://a.example');
    expect(normaliseOrigin('http://[::1]:80')).toBe('http://[::1]');
    expect(normaliseOrigin('*')).toBe('*');
    for (const bad of [
      'null',
      'file:///x',
      'https://a.example/x',
      'https://a.example:0',
      'https://[::1',
      'https://a_b.example',
    ])
      expect(normaliseOrigin(bad), bad).toBeUndefined();
  });
});

describe('check-config', () => {
  const dir = mkdtempSync(join(tmpdir(), 'awp-edge-check-'));
  const readmeBlock = (): string => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('\n## Configuration\n'));
    return /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
  };

  it('deploy/kustomize/base/edge.yaml checks without the production secrets, listing them', () => {
    const { config, runtime } = checkConfigFile(join(REPO, 'deploy/kustomize/base/edge.yaml'), {});
    expect(config.routes.map((r) => r.path)).toEqual(['/']);
    expect(runtime.map((r) => r.split(':')[0])).toEqual([
      'agents.tokens_file',
      'routes[0].upstream_token_file',
    ]);
    for (const r of runtime)
      expect(r).toMatch(/cannot read \/var\/run\/secrets\/awp-edge\/.*\(needed at run time\)$/);
  });

  it('--strict requires them; with them present, nothing is listed', () => {
    const file = join(REPO, 'deploy/kustomize/base/edge.yaml');
    expect(() => checkConfigFile(file, {}, true)).toThrow(ConfigError);
    // The same config with its credential files where they exist (the pod mounts them from a Secret).
    const secrets = join(dir, 'secrets');
    mkdirSync(secrets, { recursive: true });
    writeFileSync(join(secrets, 'agent-tokens'), 'a,b');
    writeFileSync(join(secrets, 'upstream-token'), 'u');
    const present = join(dir, 'deploy-edge.yaml');
    writeFileSync(present, readFileSync(file, 'utf8').replaceAll('/var/run/secrets/awp-edge', secrets));
    expect(checkConfigFile(present, {}, true).runtime).toEqual([]);
    expect(checkConfigFile(present, {}).runtime).toEqual([]);
  });

  it("README's configuration block passes, its certificate files and variables listed as needed at run time", () => {
    const file = join(dir, 'readme-edge.yaml');
    writeFileSync(file, readmeBlock());
    const { config, runtime } = checkConfigFile(file, {});
    expect(config.routes.map((r) => r.name)).toEqual(['arm']);
    expect(runtime.map((r) => r.split(':')[0])).toEqual([
      'agents.tokens_env',
      'routes[0].upstream_token_env',
      'routes[0].agents.tokens_env',
      'routes[0].approvers.tokens_env',
      'tls.cert_file',
      'tls.key_file',
      'webtransport.cert_file',
      'webtransport.key_file',
    ]);
  });

  it('credentials a route inherits from AWP_EDGE_AGENT_TOKENS are needed at run time, not now', () => {
    const file = join(dir, 'no-agents.yaml');
    writeFileSync(file, 'routes:\n  - upstream: ws://w/\n');
    const message =
      'routes[0].agents: no agent credentials: set AWP_EDGE_AGENT_TOKENS (comma-separated), or agents.tokens / tokens_env / tokens_file in the config';
    expect(checkConfigFile(file, {}).runtime).toEqual([`${message} (needed at run time)`]);
    expect(() => checkConfigFile(file, {}, true)).toThrow(message);
    expect(
      checkConfigFile(file, { AWP_EDGE_AGENT_TOKENS: 'a' }, true).config.routes[0]!.agent_tokens,
    ).toEqual(['a']);
    // A route's own (empty) agents section gets no such pass: nothing at run time would fill it.
    writeFileSync(file, 'routes:\n  - upstream: ws://w/\n    agents: {tokens: []}\n');
    expect(() => checkConfigFile(file, {})).toThrow(message);
  });

  it('a real problem still fails, and a value given is still checked', () => {
    const file = join(dir, 'bad.yaml');
    writeFileSync(
      file,
      'routes:\n  - upstream: ws://w/\nagents:\n  tokens_env: T\ntransport:\n  max_json_depth: 2\n',
    );
    expect(() => checkConfigFile(file, {})).toThrow(
      /transport\.max_json_depth: expected an integer from 8 to 1024/,
    );
    expect(() => checkConfigFile(file, { T: 'has space' })).toThrow(/agents\.tokens: a token has characters/);
  });
});
