/**
 * Writes the committed seed corpus (test/fuzz/corpus/<target>/) and the dictionary (test/fuzz/awp.dict) from the
 * spec's example traces and frame test vectors in ../shared/awp. Run after changing a target's input format:
 *   npx tsx test/fuzz/make-corpus.ts
 * Every relay seed is checked to read back as the script it was written from.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decodeFrame } from '../../src/protocol/frame.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import { frameToInline, inlineToFrame } from '../../src/protocol/inline-frame.js';
import { AWP_METHODS } from '../../src/protocol/methods.js';
import { decodeScript } from './targets/relay.fuzz.js';
import { FdpWriter, ScriptWriter } from './targets/script.js';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const AWP = join(HERE, '../../../shared/awp');
const TRACES = join(AWP, 'spec/examples/v0.1/traces');
const VECTOR_FILES = [
  'conformance/spec/frames.json',
  'sdk-ts-schemas/test-vectors/frames.json',
  'spec/schemas/test-vectors/frames.json',
];

interface TraceLine {
  from: 'agent' | 'world';
  msg: Record<string, unknown>;
}

function trace(file: string): TraceLine[] {
  return readFileSync(join(TRACES, file), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Partial<TraceLine>)
    .filter((l): l is TraceLine => l.from === 'agent' || l.from === 'world');
}

const traces = new Map(
  readdirSync(TRACES)
    .filter((f) => f.endsWith('.jsonl'))
    .sort()
    .map((f) => [f.replace(/\.jsonl$/, ''), trace(f)] as const),
);

function writeCorpus(target: string, seeds: Iterable<Buffer>): number {
  const dir = join(HERE, 'corpus', target);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const names = new Set<string>();
  for (const s of seeds) {
    const name = createHash('sha1').update(s).digest('hex');
    names.add(name);
    writeFileSync(join(dir, name), s);
  }
  return names.size;
}

// ---- jsonrpc: every trace message, as sent.
const messages = [...traces.values()].flatMap((t) => t.map((l) => JSON.stringify(l.msg)));
const jsonrpcSeeds = [...new Set(messages)].map((m) => Buffer.from(m));

// ---- relay: each trace as a script; traces that start inside a session get the opening of a core trace.
function opening(mode: 'streaming' | 'lockstep'): TraceLine[] {
  const core = traces.get(mode === 'lockstep' ? 'core-lockstep' : 'core-streaming')!;
  return core.slice(0, 4); // initialize, its result, session.open, session.ready
}

function relayScript(lines: TraceLine[], config: number): Buffer {
  const w = new ScriptWriter(config);
  let dialled = false;
  for (const l of lines) {
    const text = JSON.stringify(l.msg);
    if (l.from === 'agent') {
      w.text('agent', text);
      if (l.msg.method === 'session.resume') w.event('looked-up', 1).event('upstream-opened');
      else if (!dialled) w.event('upstream-opened');
      dialled = true;
    } else {
      w.text('world', text);
    }
  }
  return w.bytes();
}

const relaySeeds: Buffer[] = [];
for (const [name, lines] of traces) {
  const starts = lines[0]?.msg.method === 'initialize';
  const full = starts ? lines : [...opening(name.includes('lockstep') ? 'lockstep' : 'streaming'), ...lines];
  relaySeeds.push(relayScript(full, 0), relayScript(full, 3));
}
{
  // A drop and a resume on a second connection, with the store's answer and a durable journal.
  const core = traces.get('core-streaming')!;
  const resume = traces.get('disconnect')!;
  const w = new ScriptWriter(0);
  for (const l of core.slice(0, 4)) w.text(l.from, JSON.stringify(l.msg));
  w.event('durable').event('agent-closed').event('new-connection', 0);
  for (const l of resume.slice(0, 4)) {
    w.text(l.from, JSON.stringify(l.msg));
    if (l.msg.method === 'session.resume') w.event('looked-up', 1).event('upstream-opened');
  }
  w.event('select', 0).event('tick', 500).event('upstream-closed');
  relaySeeds.push(w.bytes());
}
{
  // Nesting inside the messages the relay reads: the fuzzer grows `repeat` (issue 12's 5,000-level arrays).
  const initialize =
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_versions":["0.1"],"x":';
  for (const [head, op] of [
    [initialize, 'agent'],
    ['{"jsonrpc":"2.0","id":7,"method":"ping","params":{"origin_ns":1,"x":', 'agent'],
    ['{"jsonrpc":"2.0","id":1,"result":{"protocol_version":"0.1","x":', 'world'],
  ] as const) {
    const w = new ScriptWriter(0);
    if (op === 'world') w.text('agent', `${initialize}0}}`).event('upstream-opened');
    w.amplified(op, { head, unit: '[', middle: '0', close: ']', tail: '}}', repeat: 3 });
    relaySeeds.push(w.bytes());
  }
}
for (const s of relaySeeds) {
  if (decodeScript(s).events.length === 0) throw new Error('a relay seed reads back empty');
}

// ---- frames: every test vector (valid and invalid), and trace obs.frame params encoded as binary.
const vectorHex = new Set<string>();
for (const f of VECTOR_FILES) {
  const doc = JSON.parse(readFileSync(join(AWP, f), 'utf8')) as { vectors: { hex: string }[] };
  for (const v of doc.vectors) vectorHex.add(v.hex);
}
const framesParams = [...traces.values()].flatMap((t) =>
  t.filter((l) => l.msg.method === 'obs.frame' || l.msg.method === 'cmd.frame').map((l) => l.msg.params),
);
const frameSeeds: Buffer[] = [...vectorHex].map((h) => Buffer.from(h, 'hex'));
for (const p of framesParams) frameSeeds.push(encodeFrame(inlineToFrame(p)));

// ---- inline frames: trace params, each valid vector as inline params, and vendor-declaring channels.
const inlineSeeds = framesParams.map((p) => Buffer.from(JSON.stringify(p)));
const camera = {
  id: 'rgb_wrist',
  modality: 'image/jpeg',
  schema: { 'x-acme.extensions': { exposure_us: '0x9a', gain: { type: 155 } } },
  'x-beta.extensions': [{ name: 'roi', type: 0x9c }],
};
for (const h of vectorHex) {
  let frame;
  try {
    frame = decodeFrame(Buffer.from(h, 'hex'));
  } catch {
    continue; // an invalid vector has no inline form
  }
  if (frame.channel_id === 0) continue;
  const params = frameToInline(frame);
  inlineSeeds.push(Buffer.from(JSON.stringify(params)));
  inlineSeeds.push(Buffer.from(JSON.stringify({ channel: camera, params })));
}
inlineSeeds.push(
  Buffer.from(
    JSON.stringify({
      channel: camera,
      params: {
        channel_id: 2,
        seq: 1,
        ts_mono_ns: 5,
        flags: 1,
        payload_b64: 'AAE=',
        'x-acme.exposure_us': 'AQI=',
      },
    }),
  ),
);

// ---- upgrade: requests in the target's order of reads (see upgrade.fuzz.ts); `$A`/`$P`/`$S` are credentials.
interface Req {
  config?: number;
  path?: number;
  tail?: string;
  query?: string;
  host?: string;
  origin?: string;
  authorization?: string;
  protocols?: string;
  webtransport?: boolean;
}
function upgradeSeed(r: Req): Buffer {
  const w = new FdpWriter()
    .int(r.config ?? 0, 0xff)
    .int(r.path ?? 0, 8)
    .string(r.tail ?? '', 64);
  w.bool(r.query !== undefined);
  if (r.query !== undefined) w.string(r.query, 64);
  for (const [v, max] of [
    [r.host, 96],
    [r.origin, 96],
    [r.authorization, 96],
    [r.protocols, 128],
  ] as const) {
    w.bool(v !== undefined);
    if (v !== undefined) w.string(v, max);
  }
  return w.bool(r.webtransport ?? false).bytes();
}
const host = '127.0.0.1:8080';
const upgradeSeeds = [
  { host, authorization: 'Bearer $A', protocols: 'awp' },
  { host, authorization: 'Bearer $P', protocols: 'awp', config: 1 },
  { host, protocols: 'awp, awp.bearer.$A', config: 0x80 },
  { path: 1, host: 'edge.example.com', origin: 'https://app.example.com', protocols: 'awp', config: 1 },
  { path: 2, host, origin: 'http://evil.example', protocols: 'awp' },
  { path: 3, host, protocols: 'awp, awp.bearer.$S', config: 2 },
  { path: 3, host, protocols: 'awp, awp.bearer.$S', config: 3, webtransport: true },
  { path: 4, host, protocols: 'awp, awp.bearer.$S', config: 2 },
  { path: 5, protocols: 'awp', config: 0x20 },
  { host, authorization: 'Bearer $A', protocols: 'awp', query: 'token=$A' },
  { host, protocols: 'awp', query: 'x=1' },
  { path: 8, tail: '/;token=$A', host, protocols: 'awp' },
  { path: 8, tail: '/$S/stream', host, protocols: 'awp' },
  { host: 'a b', authorization: 'Bearer $A', protocols: 'awp', config: 1 },
  { host: '[::1]:8080', authorization: 'Bearer $A', protocols: 'awp', config: 1 },
  { host, authorization: 'Bearer $A', protocols: 'awp', config: 0x10 },
  { host, authorization: 'Bearer $A', protocols: 'awp', config: 0x44 },
  { host, authorization: 'Bearer nope', protocols: 'awp' },
  { host, authorization: 'Bearer $A', protocols: 'mqtt' },
].map(upgradeSeed);

// ---- dictionary: method names and the members the edge reads.
const words = new Set<string>([
  'jsonrpc',
  '2.0',
  'id',
  'method',
  'params',
  'result',
  'error',
  'code',
  'message',
]);
for (const m of AWP_METHODS) words.add(m.method);
for (const k of [
  'session_token',
  'last_status_seq',
  'status_seq',
  'stream_endpoints',
  'binding',
  'url',
  'ws',
  'inline',
  'webtransport',
  'embodiment',
  'embodiments',
  'mode',
  'lockstep',
  'streaming',
  'granted',
  'channels',
  'channel',
  'channel_id',
  'rate_hz',
  'envelopes',
  'session_id',
  'reconnect_window_ms',
  'heartbeat_interval_ms',
  'origin_ns',
  'receive_ns',
  'transmit_ns',
  'state',
  'closed',
  'action_id',
  'ts_mono_ns',
  'ts_send_ns',
  'protocol_versions',
  'observation_channels',
  'loss_class',
  'latest-wins',
  'reliable',
  '9007199254740992',
  '-1',
  'null',
  '[[[[',
  ']]]]',
  '$A',
  '$P',
  '$S',
  'Bearer ',
  'awp.bearer.',
  'awp',
  '/stream',
  'https://',
  'http://',
  ':443',
  '%2F',
  ';token=',
]) {
  words.add(k);
}
const dict = [...words].map((w) => `"${w.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`).join('\n');
writeFileSync(
  join(HERE, 'awp.dict'),
  `# AWP method names and members the edge reads (make-corpus.ts)\n${dict}\n`,
);

const counts = {
  jsonrpc: writeCorpus('jsonrpc', jsonrpcSeeds),
  relay: writeCorpus('relay', relaySeeds),
  frame: writeCorpus('frame', frameSeeds),
  'inline-frame': writeCorpus('inline-frame', inlineSeeds),
  upgrade: writeCorpus('upgrade', upgradeSeeds),
};
console.log(JSON.stringify(counts));
