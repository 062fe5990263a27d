import { it } from 'vitest';
import { startRig, sleep } from './rig.js';
import { AGENT_TOKEN } from '../support/edge.js';
import { ObserverClient } from './observer-client.js';

it('stream drop and resume', async () => {
  const rig = await startRig({ world: { cameraBytes: 4096 } });
  try {
    const a = await rig.observer({ kind: 'ws', subscribe: [{ channel: 'camera' }, { channel: 'proprio', rate_hz: 20 }, { channel: 'state' }] });
    await sleep(700);
    const before = new Map([...a.channels].map(([id, l]) => [id, l.count]));
    const lastSeq = new Map([...a.channels].map(([id, l]) => [id, l.lastSeq()]));
    for (let k = 0; k < 4; k++) {
      const n = new Map([...a.channels].map(([id, l]) => [id, l.count]));
      await a.dropStream(); await sleep(150); await a.openStream(); await sleep(250);
      for (const [id, l] of a.channels) { const i = n.get(id)!; console.log('after reconnect', k, a.names.get(id), 'last', l.seq[i-1], 'next', l.seq.slice(i, i + 2), l.flags.slice(i, i + 2)); }
    }
    await a.dropStream();
    await sleep(400);
    const during = [...a.channels].map(([id, l]) => l.count - before.get(id)!);
    console.log('during outage', during);
    await a.openStream();
    await sleep(400);
    for (const [id, l] of a.channels) {
      const i = before.get(id)!;
      console.log('after reconnect', a.names.get(id), 'last before', lastSeq.get(id), 'next', l.seq.slice(i, i + 3), l.flags.slice(i, i + 3));
    }
    // resume
    const token = a.ready!.session_token as string;
    const lastStatus = Math.max(...a.statusSeqs());
    const before2 = new Map([...a.channels].map(([id, l]) => [id, l.count]));
    a.terminate();
    await sleep(300);
    const b = await ObserverClient.connect(rig.edge.url('/arm'), { kind: 'ws', credential: AGENT_TOKEN, subscribe: [], clockOrigin: rig.origin });
    await b.ok('initialize', { protocol_versions: ['0.1'], agent: { name: 'x', version: '1', vendor: 'v' }, consumes_modalities: ['proprio/json', 'image/raw', 'text/event+json'] });
    const r = await b.ok('session.resume', { session_token: token, last_status_seq: lastStatus });
    b.ready = r; b.learnGrants((r.granted as { channels: unknown }).channels);
    await sleep(300);
    for (const [id, l] of b.channels) {
      const la = a.channels.get(id)!;
      console.log('after resume', b.names.get(id), 'last before', la.lastSeq(), 'next', l.seq.slice(0, 3), l.flags.slice(0, 3), l.streamed.slice(0,3));
    }
    console.log(JSON.stringify(r).slice(0, 300), b.messages.slice(2, 5).map((m) => JSON.stringify(m)));
    void before2;
    b.terminate();
  } finally { await rig.close(); }
});
