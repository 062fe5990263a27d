/**
 * Credential reloads in an edge started from a config file (as `serve --config` starts it), over real
 * sockets: budgets keyed by credential keep their counts across a reload, approver credentials rotate, a
 * retired credential is still refused inside a URL, a watcher reports a broken file once, a secret the edge
 * reads only at start is said to need a restart, and the messages never carry a credential.
 * (test/cli/credential-reload.test.ts rotates through SIGHUP and a Secret volume swap in a real process.)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { configFileSource } from '../../src/config/load.js';
import { startDemoWorld } from '../../src/demo/index.js';
import { Edge } from '../../src/edge/edge.js';
import { AwpClient, HttpRefusal, initializeParams } from '../support/awp-client.js';
import { captureLogs } from '../hostile/support.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Started {
  readonly edge: Edge;
  readonly dir: string;
  readonly lines: string[];
  url(path?: string): string;
}

/** An edge from a config file whose agent (and approver) credentials come from files in a temp dir. */
async function edgeFromFile(extra: Record<string, unknown> = {}): Promise<Started> {
  const dir = mkdtempSync(join(tmpdir(), 'awp-edge-reload-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 });
  cleanups.push(() => world.close());
  writeFileSync(join(dir, 'agents'), 'agent-a\n');
  writeFileSync(join(dir, 'approvers'), 'approver-a\n');
  const file = join(dir, 'edge.yaml');
  writeFileSync(
    file,
    stringify({
      listen: '127.0.0.1:0',
      admin: '127.0.0.1:0',
      engine: process.env.AWP_EDGE_ENGINE ?? 'ws',
      agents: { tokens_file: join(dir, 'agents') },
      routes: [
        {
          name: 'arm',
          path: '/arm',
          upstream: world.url,
          approvers: { tokens_file: join(dir, 'approvers') },
        },
      ],
      credential_files: { watch: false },
      ...extra,
    }),
  );
  const source = configFileSource(file, {});
  const { log, lines } = captureLogs();
  const edge = await Edge.start(source.config, { reread: source.reread, log });
  cleanups.push(() => edge.close());
  return { edge, dir, lines, url: (path = '/arm') => `ws://127.0.0.1:${edge.port}${path}` };
}

async function status(url: string, credential: string): Promise<number> {
  try {
    const c = await AwpClient.connect(url, { credential });
    cleanups.push(() => c.close());
    return 101;
  } catch (err) {
    if (err instanceof HttpRefusal) return err.status;
    throw err;
  }
}

const events = (lines: readonly string[], event: string) =>
  lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.event === event);

describe('credential reloads', () => {
  it('budgets keyed by credential keep their counts across a reload', async () => {
    const s = await edgeFromFile({ budgets: { max_connections: 2 } });
    expect(await status(s.url(), 'agent-a')).toBe(101);
    expect(await status(s.url(), 'agent-a')).toBe(101);
    writeFileSync(join(s.dir, 'agents'), 'agent-a,agent-b\n');
    expect(s.edge.reloadCredentials()).toMatchObject({ ok: true, changed: ['arm'], retiredConnections: 0 });
    // agent-a still holds two connections: a third is over its budget; agent-b has its own.
    expect(await status(s.url(), 'agent-a')).toBe(429);
    expect(await status(s.url(), 'agent-b')).toBe(101);
  });

  it('approver credentials rotate like agent credentials', async () => {
    const s = await edgeFromFile();
    const approver = await AwpClient.connect(s.url(), { credential: 'approver-a' });
    cleanups.push(() => approver.close());
    await approver.ok('initialize', initializeParams());
    writeFileSync(join(s.dir, 'approvers'), 'approver-b\n');
    expect(s.edge.reloadCredentials()).toMatchObject({ ok: true, retiredConnections: 1 });
    expect(await status(s.url(), 'approver-a')).toBe(401);
    expect(await status(s.url(), 'approver-b')).toBe(101);
    // The approver connection opened before goes on.
    expect((await approver.ok('ping', { origin_ns: 3 })).origin_ns).toBe(3);
  });

  it('a retired credential in a URL is still refused as a credential (AWP-SEC-006)', async () => {
    const s = await edgeFromFile();
    writeFileSync(join(s.dir, 'agents'), 'agent-b\n');
    expect(s.edge.reloadCredentials().ok).toBe(true);
    for (const leaked of ['agent-a', 'agent-b']) {
      const refused = await AwpClient.connect(`${s.url()}/${leaked}`, { credential: 'agent-b' }).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(refused).toBeInstanceOf(HttpRefusal);
      expect((refused as HttpRefusal).status).toBe(400);
      expect((refused as HttpRefusal).body).toMatch(/credentials must not appear in URLs/);
    }
  });

  it('a failed reload changes nothing and names the file; the lines never carry a credential', async () => {
    const s = await edgeFromFile();
    writeFileSync(join(s.dir, 'agents'), ' , \n');
    writeFileSync(join(s.dir, 'approvers'), 'approver-b\n');
    const out = s.edge.reloadCredentials();
    expect(out).toEqual({
      ok: false,
      problems: [
        `${join(s.dir, 'edge.yaml')}: agents.tokens_file: ${join(s.dir, 'agents')} holds no credential (it is empty)`,
      ],
    });
    // Nothing of the new document applies, not even its valid parts.
    expect(await status(s.url(), 'approver-b')).toBe(401);
    expect(await status(s.url(), 'approver-a')).toBe(101);
    expect(await status(s.url(), 'agent-a')).toBe(101);
    const failed = events(s.lines, 'credentials_reload_failed');
    expect(failed).toHaveLength(1);
    for (const secret of ['agent-a', 'approver-a', 'approver-b'])
      expect(s.lines.join('\n')).not.toContain(secret);
  });

  it('a watcher reports a broken file once, the operator signal every time', async () => {
    const s = await edgeFromFile();
    writeFileSync(join(s.dir, 'agents'), '\n');
    expect(s.edge.reloadCredentials('watch').ok).toBe(false);
    expect(s.edge.reloadCredentials('watch').ok).toBe(false);
    expect(events(s.lines, 'credentials_reload_failed')).toHaveLength(1);
    expect(s.edge.reloadCredentials('signal').ok).toBe(false);
    expect(events(s.lines, 'credentials_reload_failed')).toHaveLength(2);
    // Repaired with the same credential as before: a success to report (the last reload had failed).
    writeFileSync(join(s.dir, 'agents'), 'agent-a\n');
    expect(s.edge.reloadCredentials('watch')).toMatchObject({ ok: true, changed: [] });
    expect(events(s.lines, 'credentials_reloaded')).toHaveLength(1);
    // Nothing changed since: a watcher stays quiet.
    expect(s.edge.reloadCredentials('watch').ok).toBe(true);
    expect(events(s.lines, 'credentials_reloaded')).toHaveLength(1);
    const text = await (await fetch(`http://127.0.0.1:${s.edge.adminPort}/metrics`)).text();
    expect(text).toContain('awp_edge_config_reloads_total{result="failure"} 2');
    expect(text).toContain('awp_edge_config_reloads_total{result="success"} 1');
    expect(text).toContain('awp_edge_config_last_reload_successful 1');
  });

  it('a secret read only at start (the store URL) is said to need a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'awp-edge-reload-url-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const url = join(dir, 'redis-url');
    // Nothing listens there: the edge serves without its store (readyz false), which is enough here.
    writeFileSync(url, 'redis://127.0.0.1:9/0\n');
    const s = await edgeFromFile({ store: { kind: 'redis', url_file: url } });
    writeFileSync(url, 'redis://127.0.0.1:9/1\n');
    expect(s.edge.reloadCredentials()).toMatchObject({ ok: true, changed: [] });
    const [line] = events(s.lines, 'credentials_reloaded');
    expect(line).toMatchObject({ restart_needed: ['store.url'] });
    expect(line!.msg).toBe(
      'credentials reloaded: nothing changed; store.url changed: used only after a restart',
    );
    expect(s.lines.join('\n')).not.toContain('127.0.0.1:9/1');
  }, 30_000);
});
