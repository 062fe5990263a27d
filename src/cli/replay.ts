/**
 * `awp-edge replay FILE --world URL [--seed N]` (issue 14, AWP-REP-003): plays the agent side of a recorded
 * relay session against a world, as a plain AWP agent, and compares what src/recorder/replay-compare.ts
 * says to compare. The replaying agent answers the world's pings and pings within its watchdog; it sends
 * each recorded call once the previous one was answered.
 */
import { readFileSync } from 'node:fs';
import { parseMessage, requestText, resultText } from '../protocol/jsonrpc.js';
import { createFrameHeader, peekFrame } from '../protocol/frame.js';
import { parseRecords } from '../recorder/read.js';
import { sha256Hex } from '../recorder/record.js';
import { differences, Outcome, replayPlan, type ReplayPlan } from '../recorder/replay-compare.js';
import { verifyText } from '../recorder/verify.js';
import { urlCarriesCredential } from '../transport/auth.js';
import { dialUpstream, type UpstreamConnection } from '../transport/upstream.js';
import { UsageError, type Parsed } from './args.js';
import type { Output } from './recordings.js';

const CALL_TIMEOUT_MS = 15_000;
/** After the last call: how long frames and transitions may still arrive. */
const SETTLE_MS = 2_000;
const UPSTREAM_TOKEN_ENV = 'AWP_EDGE_UPSTREAM_TOKEN';

/** An error the operator can act on: one line, exit 1. */
export class ReplayError extends Error {}

export async function replayCommand(
  args: Parsed,
  io: Output,
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  const file = args.positionals[0];
  const world = args.values.world as string | undefined;
  if (file === undefined) throw new UsageError('awp-edge replay: needs a FILE (see awp-edge replay --help)');
  if (world === undefined)
    throw new UsageError('awp-edge replay: needs --world URL (see awp-edge replay --help)');
  let url: URL;
  try {
    url = new URL(world);
  } catch {
    throw new UsageError(
      `awp-edge replay: --world expects a ws:// or wss:// URL, got ${JSON.stringify(world)}`,
    );
  }
  if (url.protocol !== 'ws:' && url.protocol !== 'wss:')
    throw new UsageError(
      `awp-edge replay: --world expects a ws:// or wss:// URL, got ${JSON.stringify(world)}`,
    );
  if (url.username !== '' || url.password !== '' || urlCarriesCredential(url.search.slice(1)))
    throw new UsageError(`awp-edge replay: --world carries a credential; give it in ${UPSTREAM_TOKEN_ENV}`);
  const seedText = args.values.seed as string | undefined;
  const seed = seedText === undefined ? undefined : Number(seedText);
  if (seed !== undefined && (!/^[0-9]+$/.test(seedText!) || !Number.isSafeInteger(seed)))
    throw new UsageError(
      `awp-edge replay: --seed expects an integer from 0 to 2^53 - 1, got ${JSON.stringify(seedText)}`,
    );

  const text = readFileSync(file, 'utf8');
  const verdict = verifyText(text, { allowOpen: true });
  if (!verdict.ok) throw new ReplayError(`${file}:${verdict.line}: ${verdict.problem} (not replayed)`);
  const plan = replayPlan(parseRecords(text));
  if (typeof plan === 'string') throw new ReplayError(`${file}: ${plan}`);
  if (plan.mode !== 'lockstep')
    io.err(
      `warning: the recorded session ran ${plan.mode ?? 'in an unknown mode'}: its frames depend on timing; replay is deterministic in lockstep (AWP-REP-001)`,
    );
  if (plan.redactedCalls > 0)
    io.err(
      `warning: ${plan.redactedCalls} recorded call(s) had values redacted (redact_paths); they are sent as recorded`,
    );
  const replayed = await run(plan, url.href, env[UPSTREAM_TOKEN_ENV], seed);
  const found = differences(plan.recorded, replayed);
  if (found.length > 0) {
    for (const d of found) io.err(`not reproduced: ${d}`);
    return 1;
  }
  io.out(
    `reproduced: ${plan.calls.length} calls replayed; ${replayed.frameCount} frames on ${replayed.frames.size} channel(s) and ${replayed.transitions.length} transitions as recorded`,
  );
  return 0;
}

interface Pending {
  resolve(msg: { result?: unknown; error?: unknown }): void;
}

/** Replays the plan against the world; the outcome it produced. */
async function run(
  plan: ReplayPlan,
  url: string,
  credential: string | undefined,
  seed: number | undefined,
): Promise<Outcome> {
  const got = new Outcome();
  const pending = new Map<number, Pending>();
  let nextId = 1;
  const link: { conn?: UpstreamConnection } = {};
  let lost: string | undefined;
  const streams: UpstreamConnection[] = [];
  const clock = () => Number(process.hrtime.bigint());
  const fault = (_where: string, err: unknown) => {
    lost = `internal error: ${String(err)}`;
  };
  const onText = (text: string) => {
    const msg = parseMessage(text);
    if (msg.kind === 'invalid') return;
    if (msg.kind === 'request') {
      // The world's heartbeat (AWP-SAF-001), answered on this agent's clock; other requests are not ours.
      if (msg.method === 'ping') {
        const p = msg.params as { origin_ns?: unknown } | undefined;
        const now = clock();
        link.conn?.send(
          resultText(msg.id, { origin_ns: p?.origin_ns ?? 0, receive_ns: now, transmit_ns: now }),
          false,
        );
      }
      return;
    }
    if (msg.kind === 'notification') {
      if (msg.method === 'obs.frame') {
        const p = msg.params as { channel_id?: unknown; payload_b64?: unknown } | undefined;
        const b64 = typeof p?.payload_b64 === 'string' ? p.payload_b64 : '';
        got.frame(p?.channel_id, sha256Hex(Buffer.from(b64, 'base64')));
      } else got.notification(msg.method, msg.params);
      return;
    }
    if (typeof msg.id !== 'number') return;
    const waiting = pending.get(msg.id);
    if (waiting === undefined) return;
    pending.delete(msg.id);
    if (msg.kind === 'result') got.result(msg.result);
    waiting.resolve(msg.kind === 'result' ? { result: msg.result } : { error: msg.error });
  };
  const dial = (to: string, token: string | undefined, handlers: Parameters<typeof dialUpstream>[1]) =>
    dialUpstream(
      {
        url: to,
        credential: token,
        connectTimeoutMs: 10_000,
        maxMessageBytes: 256 * 1024 * 1024,
        pingIntervalMs: 0,
        onFault: fault,
      },
      handlers,
    ).catch((err: unknown) => {
      throw new ReplayError(`${to}: ${err instanceof Error ? err.message : String(err)}`);
    });
  const conn = await dial(url, credential, {
    message: (data, binary) => {
      if (!binary) onText(data as string);
    },
    drain: () => undefined,
    close: () => {
      lost ??= 'the world closed the connection';
      for (const p of pending.values()) p.resolve({ error: { message: lost } });
      pending.clear();
    },
  });
  const call = (method: string, params: unknown) =>
    new Promise<{ result?: unknown; error?: unknown }>((resolve, reject) => {
      if (lost !== undefined) return reject(new ReplayError(`before ${method}: ${lost}`));
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new ReplayError(`${method}: no answer within ${CALL_TIMEOUT_MS} ms`));
      }, CALL_TIMEOUT_MS);
      pending.set(id, {
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
      });
      conn.send(requestText(id, method, params), false);
    });
  link.conn = conn;
  let pinger: NodeJS.Timeout | undefined;
  try {
    const init = await call(
      'initialize',
      plan.initialize ?? { protocol_versions: ['0.1'], agent: { name: 'awp-edge-replay', version: '0.1.0' } },
    );
    if (init.error !== undefined)
      throw new ReplayError(`the world refused initialize: ${JSON.stringify(init.error)}`);
    const watchdog = watchdogMs(init.result);
    pinger = setInterval(
      () => void call('ping', { origin_ns: clock() }).catch(() => undefined),
      Math.max(100, watchdog / 4),
    );
    const open = seed === undefined ? plan.open : { ...plan.open, seed };
    const ready = await call('session.open', open);
    if (ready.error !== undefined)
      throw new ReplayError(`the world refused session.open: ${JSON.stringify(ready.error)}`);
    await dialStream(ready.result, plan, dial, got, streams);
    for (const c of plan.calls) await call(c.method, c.params);
    const until = Date.now() + SETTLE_MS;
    while (
      Date.now() < until &&
      (got.frameCount < plan.recorded.frameCount || got.transitions.length < plan.recorded.transitions.length)
    )
      await new Promise((r) => setTimeout(r, 25));
    await new Promise((r) => setTimeout(r, 100)); // anything beyond what was recorded shows as a difference
    return got;
  } finally {
    clearInterval(pinger);
    for (const s of streams) s.close(1000, 'replay done');
    conn.close(1000, 'replay done');
  }
}

function watchdogMs(manifest: unknown): number {
  const m = manifest as { safety_policy?: { safe_state?: { watchdog_ms?: unknown } } } | undefined;
  const w = m?.safety_policy?.safe_state?.watchdog_ms;
  return typeof w === 'number' && w > 0 ? w : 2000;
}

/** When the recorded session took frames on a `ws` stream connection, the replay does too. */
async function dialStream(
  ready: unknown,
  plan: ReplayPlan,
  dial: (
    to: string,
    token: string | undefined,
    h: Parameters<typeof dialUpstream>[1],
  ) => Promise<UpstreamConnection>,
  got: Outcome,
  streams: UpstreamConnection[],
): Promise<void> {
  if (!plan.streamBinding) return;
  const r = ready as
    { session_token?: unknown; stream_endpoints?: { binding?: unknown; url?: unknown }[] } | undefined;
  const ep = r?.stream_endpoints?.find((e) => e.binding === 'ws');
  if (typeof ep?.url !== 'string' || typeof r?.session_token !== 'string') return;
  const h = createFrameHeader();
  streams.push(
    await dial(ep.url, r.session_token, {
      message: (data, binary) => {
        if (!binary) return;
        const buf = data as Buffer;
        try {
          peekFrame(buf, h);
        } catch {
          return;
        }
        got.frame(h.channel_id, sha256Hex(buf.subarray(h.payload_offset, h.payload_offset + h.payload_len)));
      },
      drain: () => undefined,
      close: () => undefined,
    }),
  );
}
