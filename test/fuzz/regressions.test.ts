/**
 * Replays fuzz findings through the fuzz targets' own code paths (test/fuzz/targets), on the ordinary runtime:
 * every input Jazzer.js found crashing (test/fuzz/regressions/<target>/) and the known ones written out below.
 * Also replays each committed seed (test/fuzz/corpus/<target>/), so a change of a target's input format that
 * breaks the corpus shows up here rather than as a silently weaker fuzz run.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { fuzz as fuzzFrame } from './targets/frame.fuzz.js';
import { fuzz as fuzzInlineFrame } from './targets/inline-frame.fuzz.js';
import { fuzz as fuzzJsonrpc } from './targets/jsonrpc.fuzz.js';
import { decodeScript, fuzz as fuzzRelay } from './targets/relay.fuzz.js';
import { FdpWriter, ScriptWriter } from './targets/script.js';
import { fuzz as fuzzUpgrade } from './targets/upgrade.fuzz.js';

const HERE = fileURLToPath(new URL('.', import.meta.url));

const TARGETS: Record<string, (data: Buffer) => void> = {
  relay: fuzzRelay,
  jsonrpc: fuzzJsonrpc,
  frame: fuzzFrame,
  'inline-frame': fuzzInlineFrame,
  upgrade: fuzzUpgrade,
};

function files(dir: string): { name: string; data: Buffer }[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.sort().map((name) => ({ name, data: readFileSync(join(dir, name)) }));
}

const nested = (head: string, repeat: number) => ({
  head,
  unit: '[',
  middle: '0',
  close: ']',
  tail: '}}',
  repeat,
});
const INITIALIZE = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_versions":["0.1"],"x":';

describe('fuzz findings replay without a crash', () => {
  for (const [target, fuzz] of Object.entries(TARGETS)) {
    for (const { name, data } of files(join(HERE, 'regressions', target))) {
      it(`${target}: ${name}`, () => {
        expect(() => fuzz(data)).not.toThrow();
      });
    }
  }

  // Issue 12: a 5,000-level array inside `initialize` params ended the process (RangeError in JSON.stringify,
  // RelayConnection.agentInitialize). Jazzer.js found it in 13 s on that code (regressions/relay/deep-initialize-*).
  it('relay: 10,000-level nesting in initialize params', () => {
    const input = new ScriptWriter(0).amplified('agent', nested(INITIALIZE, 10_000)).bytes();
    expect(decodeScript(input).events[0]).toMatchObject({ op: 'agent' });
    expect(() => fuzzRelay(input)).not.toThrow();
  });

  // The same inside an in-session ping whose acknowledgement the edge rewrites (RelayConnection.agentPing).
  it('relay: 10,000-level nesting in an in-session ping the edge rewrites', () => {
    const w = new ScriptWriter(0)
      .text('agent', `${INITIALIZE}0}}`)
      .event('upstream-opened')
      .text('world', '{"jsonrpc":"2.0","id":1,"result":{"protocol_version":"0.1","observation_channels":[]}}')
      .text('agent', '{"jsonrpc":"2.0","id":2,"method":"session.open","params":{"embodiment":"arm_01"}}')
      .text(
        'world',
        '{"jsonrpc":"2.0","id":2,"result":{"session_id":"s1","session_token":"wt","reconnect_window_ms":30000,' +
          '"granted":{"channels":[]},"stream_endpoints":[{"binding":"inline"}]}}',
      );
    for (let seq = 1; seq <= 3; seq++) {
      w.text(
        'world',
        `{"jsonrpc":"2.0","method":"action.status","params":{"action_id":"a","state":"executing","status_seq":${seq},"ts_mono_ns":1}}`,
      );
    }
    w.event('durable').amplified(
      'agent',
      nested(
        '{"jsonrpc":"2.0","id":3,"method":"ping","params":{"origin_ns":1,"last_status_seq":0,"x":',
        10_000,
      ),
    );
    const input = w.bytes();
    expect(decodeScript(input).events).toHaveLength(10);
    expect(() => fuzzRelay(input)).not.toThrow();
  });
  // Issue 12: session.open id 7 then world.manifest id 7 overwrote the pending open, so the world's session.ready
  // reached the agent unrewritten (the world's token and stream URL). The target's ConnectionWatch flags it.
  it('relay: a second request with a pending id does not let the world session token through', () => {
    const input = new ScriptWriter(0)
      .text('agent', `${INITIALIZE}0}}`)
      .event('upstream-opened')
      .text('world', '{"jsonrpc":"2.0","id":1,"result":{"protocol_version":"0.1","observation_channels":[]}}')
      .text('agent', '{"jsonrpc":"2.0","id":7,"method":"session.open","params":{"embodiment":"arm_01"}}')
      .text('agent', '{"jsonrpc":"2.0","id":7,"method":"world.manifest","params":{}}')
      .text(
        'world',
        '{"jsonrpc":"2.0","id":7,"result":{"session_id":"s1","session_token":"world-token-1",' +
          '"stream_endpoints":[{"binding":"ws","url":"ws://world.internal/stream"},{"binding":"inline"}]}}',
      )
      .bytes();
    expect(() => fuzzRelay(input)).not.toThrow();
  });
});

/** An upgrade to the control path `/` with an agent credential and a Host (upgrade.fuzz.ts reads in this order). */
function controlUpgrade(host: string, webtransport: boolean): Buffer {
  const w = new FdpWriter()
    .int(webtransport ? 1 : 0, 0xff)
    .int(0, 8)
    .string('', 64)
    .bool(false);
  w.bool(true).string(host, 96).bool(false).bool(true).string('Bearer $A', 96);
  return w.bool(true).string('awp', 128).bool(false).bytes();
}

describe('upgrade: a Host the edge accepts builds URLs that parse', () => {
  // Found by Jazzer.js in 97 runs (regressions/upgrade/host-d27.0.0.1-*): parseAuthority (src/transport/origin.ts)
  // accepts hosts the WHATWG URL parser refuses (a last label of digits that is no IPv4 address, "[:]"), so the
  // upgrade is accepted and, with webtransport configured, session.open throws "Invalid URL" in
  // RouteRuntime.webtransportEndpoints (contract item 4 wants 400 bad_host).
  for (const host of ['d27.0.0.1:8080', '09', '1.2.3.256', '1.1.1.1.1', '[:]']) {
    it(`Host ${host}`, () => {
      expect(() => fuzzUpgrade(controlUpgrade(host, true))).not.toThrow();
    });
  }
});

describe('committed seed corpus replays without a finding', () => {
  for (const target of Object.keys(TARGETS)) {
    it(target, () => {
      const seeds = files(join(HERE, 'corpus', target));
      expect(seeds.length).toBeGreaterThan(5);
      for (const { name, data } of seeds) {
        try {
          TARGETS[target]!(data);
        } catch (e) {
          throw new Error(`seed ${target}/${name}: ${String(e)}`, { cause: e });
        }
      }
    });
  }
});
