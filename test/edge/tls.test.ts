/** AWP-SEC-001: the agent-facing listener terminates TLS when configured. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { createDevCertificate } from '../support/dev-certificate.js';
import { AwpClient, HttpRefusal, initializeParams } from '../support/awp-client.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';

let world: RunningDemoWorld;
let edge: TestEdge;
let dir: string;
const cert = createDevCertificate({ hosts: ['127.0.0.1', 'localhost'] });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'awp-edge-tls-'));
  writeFileSync(join(dir, 'cert.pem'), cert.cert);
  writeFileSync(join(dir, 'key.pem'), cert.key);
  world = await startDemoWorld({ kind: 'arm', host: '127.0.0.1', port: 0 });
  edge = await startEdge([{ path: '/arm', upstream: world.url }], {
    tls: { cert_file: join(dir, 'cert.pem'), key_file: join(dir, 'key.pem') },
  });
});

afterAll(async () => {
  await edge.close();
  await world.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('TLS on the agent listener', () => {
  it('AWP-SEC-001 serves wss:// and offers wss:// stream endpoints', async () => {
    const url = edge.url('/arm').replace('ws://', 'wss://');
    const agent = await AwpClient.connect(url, { credential: AGENT_TOKEN, ca: cert.cert });
    await agent.ok('initialize', initializeParams());
    const ready = await agent.ok('session.open', { embodiment: 'arm_01', mode: 'streaming' });
    const ws = (ready.stream_endpoints as { binding: string; url?: string }[]).find(
      (e) => e.binding === 'ws',
    );
    expect(ws?.url).toBe(`${url}/stream`);
    const stream = await AwpClient.connect(ws!.url!, {
      credential: ready.session_token as string,
      ca: cert.cert,
    });
    stream.close();
    await agent.ok('session.close', {});
    agent.close();
  });

  it('refuses plaintext on a TLS listener', async () => {
    await expect(AwpClient.connect(edge.url('/arm'), { credential: AGENT_TOKEN }, 2000)).rejects.toSatisfy(
      (e) => !(e instanceof HttpRefusal && e.status === 101),
    );
  });
});
