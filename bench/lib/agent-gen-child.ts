/**
 * An acting agent per target (the world directly, or the world behind an edge), driven in interleaved
 * rounds so that every target sees the same machine noise: each round sends one request to each target
 * in turn (the order rotates), waiting for each answer before the next. Round trips are measured from
 * just before the write to the read that delivered the answer. Reports this process's CPU.
 */
import { performance } from 'node:perf_hooks';
import { AwpSession } from './awp-session.js';
import { LogHistogram } from './histogram.js';
import { cpuShare, serve, sleep, type Message } from './ipc.js';

interface Target {
  readonly name: string;
  readonly session: AwpSession;
}

let targets: Target[] = [];

async function rounds(
  m: Message,
  request: (t: Target, round: number) => Promise<number>,
): Promise<Record<string, unknown>> {
  const n = m.rounds as number;
  const interval = (m.intervalMs as number | undefined) ?? 0;
  const hist = new Map(targets.map((t) => [t.name, new LogHistogram()]));
  const failures = new Map(targets.map((t) => [t.name, 0]));
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let r = 0; r < n; r++) {
    for (let i = 0; i < targets.length; i++) {
      const t = targets[(r + i) % targets.length]!;
      try {
        hist.get(t.name)!.add(await request(t, r));
      } catch {
        failures.set(t.name, failures.get(t.name)! + 1);
      }
    }
    if (interval > 0) await sleep(interval);
  }
  const wall = performance.now() - t0;
  return {
    targets: Object.fromEntries(
      targets.map((t) => [t.name, { latency: hist.get(t.name)!.summary(), failures: failures.get(t.name) }]),
    ),
    cpu: cpuShare(cpu0, wall),
    wall_ms: Math.round(wall),
  };
}

const POSES = [
  [0.2, 0.1, 0.3],
  [0.1, -0.1, 0.35],
];

serve(
  {
    connect: async (m) => {
      const list = m.targets as { name: string; url: string }[];
      targets = [];
      for (const t of list) {
        const session = await AwpSession.connect(t.url, m.credential as string);
        await session.initialize();
        await session.open([], 'arm_01');
        targets.push({ name: t.name, session });
      }
      return { connected: targets.length };
    },
    pings: (m) =>
      rounds(m, async (t) => {
        const { msg, rtt_ns } = await t.session.call('ping', {
          origin_ns: Number(process.hrtime.bigint() % 10n ** 12n),
        });
        if (msg.error !== undefined) throw new Error(JSON.stringify(msg.error));
        return rtt_ns;
      }),
    submits: (m) =>
      rounds(m, async (t, r) => {
        const { msg, rtt_ns } = await t.session.call('action.submit', {
          action_id: `bench-${t.name}-${r}`,
          type: 'move_to_pose',
          params: { pose: { frame: 'base', p_m: POSES[r % 2], q: [0, 0, 0, 1] } },
        });
        if (msg.error !== undefined) throw new Error(JSON.stringify(msg.error));
        return rtt_ns;
      }),
    close: () => {
      for (const t of targets) t.session.destroy();
      return {};
    },
  },
  {},
);
