/** The targets, read from a run's summaries: measured value, target, met or missed by how much. */
import type { FanoutSummary } from '../scenarios/fanout.js';
import type { MemorySummary } from '../scenarios/memory.js';
import type { RelaySummary } from '../scenarios/relay.js';

export interface TargetCheck {
  readonly target: string;
  readonly measured: number | null;
  readonly goal: string;
  readonly met: boolean | null;
  readonly note?: string;
}

function check(
  target: string,
  measured: number | null | undefined,
  goal: string,
  met: (v: number) => boolean,
  note?: string,
): TargetCheck {
  const v = measured ?? null;
  return {
    target,
    measured: v,
    goal,
    met: v === null ? null : met(v),
    ...(note !== undefined ? { note } : {}),
  };
}

export function checkTargets(results: Record<string, unknown>): TargetCheck[] {
  const out: TargetCheck[] = [];
  const fan = results.fanout as FanoutSummary | undefined;
  if (fan !== undefined) {
    const cmp = (workload: string, n: number) =>
      fan.comparisons.find((c) => c.workload === workload && c.observers === n);
    const biggest = Math.max(...fan.comparisons.map((c) => c.observers));
    const mixed = cmp('mixed', biggest);
    const small = cmp('small', 1000);
    out.push(
      check(
        `fan-out fps, edge-uws / raw-uws, mixed, ${biggest} observers`,
        mixed?.fps['edge-uws/raw-uws'],
        '>= 0.5',
        (v) => v >= 0.5,
        biggest < 1000 ? 'quick run: the target is for 1,000 observers (--full)' : undefined,
      ),
    );
    if (small !== undefined) {
      out.push(
        check(
          'fan-out fps, edge-uws / raw-uws, small frames, 1000 observers',
          small.fps['edge-uws/raw-uws'],
          '>= 0.5',
          (v) => v >= 0.5,
        ),
      );
      out.push(
        check(
          'fan-out frames per CPU-second, edge-uws / raw-uws, small frames, 1000',
          small.frames_per_cpu_s['edge-uws/raw-uws'],
          '>= 0.5 (capacity)',
          (v) => v >= 0.5,
        ),
      );
      out.push(
        check(
          'fan-out fps, edge-uws / edge-ws, small frames, 1000 observers',
          small.fps['edge-uws/edge-ws'],
          '>= 2',
          (v) => v >= 2,
        ),
      );
      out.push(
        check(
          'fan-out frames per CPU-second, edge-uws / edge-ws, small frames, 1000',
          small.frames_per_cpu_s['edge-uws/edge-ws'],
          '>= 2 (capacity)',
          (v) => v >= 2,
        ),
      );
    }
    const unsaturated = biggest < 1000 ? 'neither engine saturates here: read the capacity row' : undefined;
    out.push(
      check(
        `fan-out fps, edge-uws / edge-ws, mixed, ${biggest} observers`,
        mixed?.fps['edge-uws/edge-ws'],
        '>= 2',
        (v) => v >= 2,
        unsaturated,
      ),
    );
    out.push(
      check(
        `fan-out frames per CPU-second, edge-uws / edge-ws, mixed, ${biggest} observers`,
        mixed?.frames_per_cpu_s['edge-uws/edge-ws'],
        '>= 2 (capacity)',
        (v) => v >= 2,
      ),
    );
    out.push(
      check(
        `fan-out frames per CPU-second, edge-uws / raw-uws, mixed, ${biggest} observers`,
        mixed?.frames_per_cpu_s['edge-uws/raw-uws'],
        '>= 0.5 (capacity)',
        (v) => v >= 0.5,
      ),
    );
    for (const h of fan.half_load ?? []) {
      out.push(
        check(
          `p99 latency added by ${h.engine} over raw-uws at half load (${h.observers} observers), median of 3`,
          h.added_p99_us_median,
          '< 1000 us',
          (v) => v < 1000,
          `per repetition: ${h.repetitions.map((r) => r.added_p99_us).join(', ')} us`,
        ),
      );
    }
  }
  const relay = results.relay as RelaySummary | undefined;
  if (relay !== undefined) {
    for (const [k, v] of Object.entries(relay.added_us)) {
      if (!k.startsWith('edge-')) continue;
      out.push(
        check(
          `ping p50 added by ${k} over direct`,
          v.ping_p50,
          '< 100 us',
          (x) => x < 100,
          `pass-through floor: ${relay.added_us[Object.keys(relay.added_us).find((x) => x.startsWith('passthrough'))!]?.ping_p50 ?? '?'} us`,
        ),
      );
    }
  }
  const mem = results.memory as MemorySummary | undefined;
  if (mem !== undefined) {
    for (const c of mem.cases.filter((x) => x.target.endsWith('observer'))) {
      out.push(
        check(
          `RSS per idle observer session, ${c.target}, ${c.sessions} sessions (KiB)`,
          c.per_session_kib.rss,
          '< 16 KiB',
          (v) => v < 16,
          c.sessions < 10_000
            ? `RSS grows in steps: at ${c.sessions} sessions it is coarse (heap ${c.per_session_kib.heap} KiB); the target is read at 10,000 (--full)`
            : undefined,
        ),
      );
    }
  }
  return out;
}
