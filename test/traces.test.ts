/**
 * The spec's ten wire traces played over real WebSockets between a scripted agent and a scripted world,
 * directly and through a relay on the `agentUrl` hook, plus proofs that the harness catches divergences.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import {
  APPROVAL_ACTION_TYPE,
  type JsonObject,
  PassThroughRelay,
  type PlayScript,
  type RelayTransform,
  ScriptedAgent,
  ScriptedWorld,
  TRACE_NAMES,
  type TraceEntry,
  TracePlayError,
  buildPlayScript,
  checkGrantsCover,
  checkPrefixAgainstGiven,
  checkTraceInvariants,
  loadTrace,
  messagesFrom,
  normaliseIllustrative,
  playTrace,
  reissueTokensAndEndpoints,
  sessionContext,
  transportActionOf,
} from './harness/index.js';

/** Connections the agent must open: one, plus one after each dropped connection or undelivered message. */
function expectedAgentConnections(script: PlayScript): number {
  const drops = script.entries.filter(
    (e) =>
      (e.kind === 'marker' && transportActionOf(e) === 'drop-control-connection') ||
      (e.kind === 'message' && !e.delivered),
  );
  return 1 + drops.length;
}

const relays: PassThroughRelay[] = [];
afterEach(async () => {
  await Promise.all(relays.splice(0).map((r) => r.close()));
});

/** An agentUrl hook that starts a relay in front of the scripted world, once per play. */
function viaRelay(transform?: RelayTransform): (worldUrl: string) => Promise<string> {
  let relay: Promise<PassThroughRelay> | undefined;
  return async (worldUrl) => {
    relay ??= PassThroughRelay.start(worldUrl, transform).then((r) => {
      relays.push(r);
      return r;
    });
    return (await relay).url;
  };
}

describe('wire traces, agent connected straight to the world', () => {
  for (const name of TRACE_NAMES) {
    it(`${name} replays agent-to-world directly`, async () => {
      const script = buildPlayScript(name);
      const result = await playTrace(script);

      // (a) the agent received exactly the world's delivered messages, prefix then trace
      expect(result.agentTranscript).toEqual(messagesFrom(script.entries, 'world'));
      const bodyWorld = messagesFrom(script.body, 'world');
      expect(result.agentTranscript.slice(result.agentTranscript.length - bodyWorld.length)).toEqual(
        bodyWorld,
      );
      // (b) the world received exactly the agent's messages
      expect(result.worldTranscript).toEqual(messagesFrom(script.entries, 'agent'));
      // (c) the spec CI's invariants, on the trace alone and on what was played
      expect(checkTraceInvariants(script.body)).toEqual([]);
      expect(checkTraceInvariants(script.entries)).toEqual([]);
      // the prefix reaches the trace's stated starting point, and grants cover every agent message
      expect(checkPrefixAgainstGiven(script)).toEqual([]);
      expect(checkGrantsCover(script)).toEqual([]);
      // transport: a new agent connection after each drop, seen by the world as a new connection too
      expect(result.agentConnections).toHaveLength(expectedAgentConnections(script));
      expect(result.worldConnections).toHaveLength(expectedAgentConnections(script));
      expect(result.undelivered.map((u) => u.entry)).toEqual(
        script.entries.filter((e) => e.kind === 'message' && !e.delivered),
      );
    });
  }
});

describe('continuation prefixes', () => {
  it('streaming continuations start after a-7 began executing (status_seq 4)', () => {
    for (const name of ['cancel', 'close-during-motion', 'disconnect', 'estop', 'quiet-agent', 'retry']) {
      const script = buildPlayScript(name);
      expect(script.basedOn).toBe('core-streaming');
      const last = script.prefix.at(-1);
      expect(last?.kind === 'message' ? last.msg : undefined).toMatchObject({
        method: 'action.status',
        params: { action_id: 'a-7', state: 'executing', status_seq: 4 },
      });
    }
  });

  it('lockstep-replace starts after the first world.tick result (tick 1)', () => {
    const script = buildPlayScript('lockstep-replace');
    expect(script.basedOn).toBe('core-lockstep');
    const last = script.prefix.at(-1);
    expect(last?.kind === 'message' ? last.msg : undefined).toEqual({
      jsonrpc: '2.0',
      id: 5,
      result: { tick: 1 },
    });
  });

  it('approval starts with the session active (status_seq 2) and transfer_vial declared, approval-gated and granted', () => {
    const script = buildPlayScript('approval');
    const last = script.prefix.at(-1);
    expect(last?.kind === 'message' ? last.msg : undefined).toMatchObject({
      method: 'session.state',
      params: { state: 'active', status_seq: 2 },
    });
    const { manifest, ready } = sessionContext(script.prefix);
    expect(manifest?.action_schemas).toContainEqual(
      expect.objectContaining({ type: APPROVAL_ACTION_TYPE, requires_approval: true }),
    );
    expect(manifest?.safety_policy).toMatchObject({ approval_timeout_ms: 60000 });
    expect(ready?.granted).toMatchObject({
      action_types: expect.arrayContaining([APPROVAL_ACTION_TYPE]) as unknown,
    });
  });

  it('without the extension the approval trace submits an undeclared, ungranted type', () => {
    const base = buildPlayScript('approval');
    const unextended = loadTrace('core-streaming').entries.slice(0, base.prefix.length);
    const script: PlayScript = { ...base, prefix: unextended, entries: [...unextended, ...base.body] };
    const violations = checkGrantsCover(script);
    expect(violations.join('\n')).toContain('"transfer_vial" has no action schema in the manifest');
    expect(violations.join('\n')).toContain('"transfer_vial" is not granted');
  });

  it('a prefix cut at the wrong place contradicts the given', () => {
    const base = buildPlayScript('cancel');
    const short = base.prefix.slice(0, -1); // drop the executing status
    expect(checkPrefixAgainstGiven({ ...base, prefix: short, entries: [...short, ...base.body] })).toEqual([
      'given.status_seq is 4, the prefix ends at 3',
      'given.actions.a-7: {"state":"executing","status_seq":4} but the prefix leaves it {"state":"accepted","status_seq":3}',
    ]);
  });
});

describe('checkTraceInvariants catches broken traces', () => {
  function mutate(name: string, line: number, change: (msg: JsonObject) => void): TraceEntry[] {
    return loadTrace(name).entries.map((e) => {
      if (e.kind !== 'message' || e.source.line !== line) return e;
      const msg = JSON.parse(JSON.stringify(e.msg)) as JsonObject;
      change(msg);
      return { ...e, msg };
    });
  }

  it('AWP-CTL-008 a status_seq that skips one', () => {
    const entries = mutate('core-lockstep', 17, (m) => ((m.params as JsonObject).status_seq = 6));
    expect(checkTraceInvariants(entries)).toEqual([
      expect.stringContaining('[core-lockstep.jsonl:17]: status_seq 6, expected 5') as unknown,
      expect.stringContaining('status_seq 6, expected 7') as unknown,
    ]);
  });

  it('AWP-CTL-008 an idempotent result must repeat the action’s latest status_seq', () => {
    // retry.jsonl line 13 repeats a-8's seq 5; claiming seq 4 (a-7's) is not a repeat of a-8's transition
    const entries = mutate('retry', 13, (m) => ((m.result as JsonObject).status_seq = 4));
    expect(checkTraceInvariants(entries)).toEqual([
      expect.stringContaining('status_seq 4, expected 8') as unknown,
    ]);
  });

  it('AWP-DAT-001 a frame seq that does not increase on its channel', () => {
    const entries = mutate('core-lockstep', 18, (m) => ((m.params as JsonObject).seq = 2));
    expect(checkTraceInvariants(entries)).toEqual([
      expect.stringContaining('channel 1 seq 2 does not increase (last 2)') as unknown,
    ]);
  });

  it('a response whose id matches no request', () => {
    const entries = mutate('core-lockstep', 19, (m) => (m.id = 99));
    expect(checkTraceInvariants(entries)).toEqual([
      expect.stringContaining('response id 99 matches no outstanding agent request') as unknown,
    ]);
  });
});

describe('the harness fails on divergence (it cannot pass vacuously)', () => {
  it('a world message changed on the way fails naming the step and the field', async () => {
    const tamper: RelayTransform = (direction, msg) => {
      if (direction === 'world-to-agent' && msg.id === 6) return { ...msg, result: { tick: 3 } };
      return msg;
    };
    const play = playTrace(buildPlayScript('core-lockstep'), { agentUrl: viaRelay(tamper) });
    await expect(play).rejects.toThrow(TracePlayError);
    await expect(play).rejects.toThrow(/step "Tick result" \(world → agent\) \[core-lockstep\.jsonl:19\]/);
    await expect(play).rejects.toThrow(/\$\.result\.tick: expected 2, got 3/);
  });

  it('an agent message changed on the way fails at the world naming the step', async () => {
    const tamper: RelayTransform = (direction, msg) =>
      direction === 'agent-to-world' && msg.method === 'action.cancel'
        ? { ...msg, params: { action_id: 'a-8' } }
        : msg;
    const play = playTrace(buildPlayScript('cancel'), { agentUrl: viaRelay(tamper) });
    await expect(play).rejects.toThrow(
      /step "Cancel the executing action" \(agent → world\) \[cancel\.jsonl:3\]: the world received a different message:\n {2}\$\.params\.action_id: expected "a-7", got "a-8"/,
    );
  });

  it('a message that never arrives fails after the bounded wait, naming the step', async () => {
    const dropPong: RelayTransform = (direction, msg) =>
      direction === 'world-to-agent' && msg.id === 3 ? null : msg;
    const started = Date.now();
    const play = playTrace(buildPlayScript('core-lockstep'), {
      agentUrl: viaRelay(dropPong),
      stepTimeoutMs: 300,
    });
    await expect(play).rejects.toThrow(
      /step "Pong with session-clock receive and transmit stamps" \(world → agent\) \[core-lockstep\.jsonl:9\]: the agent received nothing within 300 ms/,
    );
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('a message dropped in the middle of a burst fails at the step it should have been', async () => {
    const dropFrame: RelayTransform = (direction, msg) =>
      direction === 'world-to-agent' && msg.method === 'obs.frame' ? null : msg;
    const play = playTrace(buildPlayScript('core-lockstep'), { agentUrl: viaRelay(dropFrame) });
    await expect(play).rejects.toThrow(
      /\[core-lockstep\.jsonl:6\]: the agent received a different message:\n {2}\$\.method: expected "obs\.frame", got "session\.state"/,
    );
  });

  it('a message the trace does not contain fails as unexpected after the last step', async () => {
    // the relay delivers the world's last message (the close acknowledgement) twice
    const duplicate: RelayTransform = (direction, msg) =>
      direction === 'world-to-agent' && msg.id === 7 ? [msg, msg] : msg;
    const play = playTrace(buildPlayScript('core-lockstep'), { agentUrl: viaRelay(duplicate) });
    await expect(play).rejects.toThrow(
      /core-lockstep: after the last step: unexpected messages:\n {2}agent got on #1: \{"jsonrpc":"2.0","id":7,"result":\{\}\}/,
    );
  });
});

describe('transport of the scripted world and agent', () => {
  it('AWP-TRN-001 the world refuses a handshake without the awp subprotocol and selects awp otherwise', async () => {
    const world = await ScriptedWorld.start();
    try {
      for (const protocols of [[], ['not-awp']]) {
        const status = await new Promise<number | string>((resolve) => {
          const ws = new WebSocket(world.url, protocols);
          ws.on('unexpected-response', (_req, res) => {
            resolve(res.statusCode ?? 'none');
            ws.terminate();
          });
          ws.on('open', () => {
            resolve('opened');
            ws.terminate();
          });
          ws.on('error', () => undefined);
        });
        expect(status).toBe(400);
      }
      expect(world.rejectedHandshakes).toBe(2);
      expect(world.connections).toHaveLength(0);

      const agent = new ScriptedAgent({
        url: () => Promise.resolve(world.url),
        credential: 'cred-xyz',
        connectTimeoutMs: 2000,
      });
      try {
        await agent.send({ jsonrpc: '2.0', id: 1, method: 'ping', params: { origin_ns: 1 } });
        const arrival = await world.nextMessage(2000, () => 'the ping did not arrive');
        expect(arrival).toEqual({
          connectionId: 1,
          msg: { jsonrpc: '2.0', id: 1, method: 'ping', params: { origin_ns: 1 } },
        });
        expect(world.connections[0]?.authorization).toBe('Bearer cred-xyz');
      } finally {
        await agent.close();
      }
    } finally {
      await world.close();
    }
  });

  it('the agent presents its credential as a bearer header on every connection', async () => {
    const result = await playTrace(buildPlayScript('disconnect'), { credential: 'agent-cred-1' });
    expect(result.worldConnections.map((c) => c.authorization)).toEqual([
      'Bearer agent-cred-1',
      'Bearer agent-cred-1',
    ]);
  });
});

describe('teardown', () => {
  const openHandles = (): string[] =>
    process
      .getActiveResourcesInfo()
      .filter((r) => r === 'TCPSocketWrap' || r === 'TCPServerWrap')
      .sort();
  const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

  /** libuv releases a closed handle shortly after its close callback; give it a bounded moment. */
  async function settledHandles(): Promise<string[]> {
    for (let i = 0; i < 100 && openHandles().length > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return openHandles();
  }

  it('leaves no sockets, servers or timers behind, after a pass and after a failure', async () => {
    expect(await settledHandles()).toEqual([]);
    const timersBefore = timers();
    await playTrace(buildPlayScript('retry'));
    let relay: PassThroughRelay | undefined;
    try {
      const failing = playTrace(buildPlayScript('disconnect'), {
        agentUrl: async (worldUrl) => {
          relay ??= await PassThroughRelay.start(worldUrl, (direction, msg) =>
            direction === 'world-to-agent' && msg.id === 21 ? null : msg,
          );
          return relay.url;
        },
        stepTimeoutMs: 200,
      });
      await expect(failing).rejects.toThrow(TracePlayError);
    } finally {
      await relay?.close();
    }
    expect(await settledHandles()).toEqual([]);
    expect(timers()).toBeLessThanOrEqual(timersBefore);
  });
});

describe('wire traces through a relay on the agentUrl hook', () => {
  for (const name of TRACE_NAMES) {
    it(`${name} replays through a pass-through relay`, async () => {
      const script = buildPlayScript(name);
      const result = await playTrace(script, { agentUrl: viaRelay(), credential: 'relay-test' });
      expect(result.agentTranscript).toEqual(messagesFrom(script.entries, 'world'));
      expect(result.worldTranscript).toEqual(messagesFrom(script.entries, 'agent'));
      expect(relays[0]?.agentAuthorizations).toEqual(
        Array<string>(expectedAgentConnections(script)).fill('Bearer relay-test'),
      );
    });

    it(`${name} replays through a relay that re-issues tokens and endpoints, compared normalised`, async () => {
      const script = buildPlayScript(name);
      const result = await playTrace(script, {
        agentUrl: viaRelay(reissueTokensAndEndpoints({ mapResumeToken: true, keepInline: true })),
        normalise: normaliseIllustrative,
      });
      expect(result.agentTranscript.map(normaliseIllustrative)).toEqual(
        messagesFrom(script.entries, 'world').map(normaliseIllustrative),
      );
      expect(result.worldTranscript).toEqual(messagesFrom(script.entries, 'agent'));
      // the agent resumed with the token it was handed, not the trace's
      const resumes = result.agentConnections
        .flatMap((c) => c.sent)
        .filter((m) => m.method === 'session.resume')
        .map((m) => (m.params as JsonObject).session_token);
      const resumeSteps = messagesFrom(script.entries, 'agent').filter((m) => m.method === 'session.resume');
      expect(resumes).toEqual(resumeSteps.map(() => expect.stringMatching(/^st_relay_\d+$/) as unknown));
    });
  }

  it('AWP-SES-010 a resume on a new connection makes the world close the old one still open', async () => {
    let relay: PassThroughRelay | undefined;
    const script = buildPlayScript('retry');
    const result = await playTrace(script, {
      agentUrl: async (worldUrl) => {
        if (relay === undefined) {
          relay = await PassThroughRelay.start(worldUrl, undefined, { keepUpstreamOnAgentClose: true });
          relays.push(relay);
        }
        return relay.url;
      },
    });
    expect(result.worldTranscript).toEqual(messagesFrom(script.entries, 'agent'));
    // the undelivered admission was written on the old upstream, which stayed open until the resume
    expect(result.undelivered.map((u) => u.written)).toEqual([true]);
    expect(result.worldConnections.map((c) => [c.closed, c.closeCode])).toEqual([
      [true, 1000],
      [true, 1006],
    ]);
  });

  it('a resume that presents a token the world did not issue fails at the resume step', async () => {
    const play = playTrace(buildPlayScript('disconnect'), {
      agentUrl: viaRelay(reissueTokensAndEndpoints({ mapResumeToken: false, keepInline: true })),
      normalise: normaliseIllustrative,
    });
    await expect(play).rejects.toThrow(
      /step "Resume with the session token and the last status_seq processed" \(agent → world\) \[disconnect\.jsonl:6\]: session\.resume presented session_token "st_relay_1", the world issued "st_9f2a7c1e4b8d6f03"/,
    );
  });

  it('stream_endpoints that no longer end with the inline binding fail the session.ready step', async () => {
    const play = playTrace(buildPlayScript('core-streaming'), {
      agentUrl: viaRelay(reissueTokensAndEndpoints({ mapResumeToken: true, keepInline: false })),
      normalise: normaliseIllustrative,
    });
    await expect(play).rejects.toThrow(
      /core-streaming\.jsonl:4\]: the agent received a different message:\n {2}\$\.result\.stream_endpoints/,
    );
  });
});
