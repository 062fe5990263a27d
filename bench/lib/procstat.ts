/**
 * CPU and memory of other processes, read from /proc (what pidusage does, without the package): CPU
 * time from /proc/<pid>/stat (utime + stime, in clock ticks), RSS from /proc/<pid>/status (VmRSS).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

let ticksPerSecond: number | undefined;
function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    ticksPerSecond = Number(r.stdout.trim()) || 100;
  }
  return ticksPerSecond;
}

export interface ProcReading {
  /** CPU seconds (user + system) since the process started. */
  readonly cpu_s: number;
  readonly main_thread_cpu_s: number;
  readonly rss_bytes: number;
  /** Peak RSS (VmHWM). */
  readonly hwm_bytes: number;
}

/** CPU seconds (user + system) of a /proc stat file (a process's, or one of its threads'). */
function cpuSeconds(path: string): number {
  const stat = readFileSync(path, 'utf8');
  // Fields after the command name (which may hold spaces) start at the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks(); // utime, stime (fields 14 and 15)
}

export function readProc(pid: number): ProcReading | undefined {
  try {
    const cpu_s = cpuSeconds(`/proc/${pid}/stat`);
    // The main thread (tid = pid): JavaScript and the engine's writes; the rest is GC helpers and the
    // libuv pool (file writes), which Node leaves unnamed.
    const main_thread_cpu_s = cpuSeconds(`/proc/${pid}/task/${pid}/stat`);
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string) =>
      Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
    return { cpu_s, main_thread_cpu_s, rss_bytes: kb('VmRSS'), hwm_bytes: kb('VmHWM') };
  } catch {
    return undefined;
  }
}

export interface ProcSummary {
  readonly pid: number;
  /** CPU over the window, % of one core. */
  readonly cpu_pct: number;
  /** The main thread's share of it (the rest: GC helper threads and the libuv pool). */
  readonly main_thread_cpu_pct: number;
  readonly rss_mib_mean: number;
  readonly rss_mib_max: number;
}

/** Samples a set of processes' RSS every `intervalMs` and their CPU over the whole window. */
export class ProcSampler {
  private readonly start = new Map<string, { cpu: number; main: number; at: number }>();
  private readonly rss = new Map<string, number[]>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pids: Readonly<Record<string, number>>,
    private readonly intervalMs = 250,
  ) {}

  begin(): void {
    const at = performance.now();
    for (const [name, pid] of Object.entries(this.pids)) {
      const r = readProc(pid);
      this.start.set(name, { cpu: r?.cpu_s ?? 0, main: r?.main_thread_cpu_s ?? 0, at });
      this.rss.set(name, r !== undefined ? [r.rss_bytes] : []);
    }
    this.timer = setInterval(() => this.sample(), this.intervalMs);
  }

  private sample(): void {
    for (const [name, pid] of Object.entries(this.pids)) {
      const r = readProc(pid);
      if (r !== undefined) this.rss.get(name)?.push(r.rss_bytes);
    }
  }

  end(): Record<string, ProcSummary> {
    clearInterval(this.timer);
    this.sample();
    const now = performance.now();
    const out: Record<string, ProcSummary> = {};
    for (const [name, pid] of Object.entries(this.pids)) {
      const s = this.start.get(name)!;
      const r = readProc(pid);
      const samples = this.rss.get(name) ?? [];
      const mean = samples.reduce((a, b) => a + b, 0) / Math.max(1, samples.length);
      out[name] = {
        pid,
        cpu_pct: r === undefined ? NaN : pct(r.cpu_s - s.cpu, now - s.at),
        main_thread_cpu_pct: r === undefined ? NaN : pct(r.main_thread_cpu_s - s.main, now - s.at),
        rss_mib_mean: round1(mean / 2 ** 20),
        rss_mib_max: round1(Math.max(0, ...samples) / 2 ** 20),
      };
    }
    return out;
  }
}

/** CPU seconds over a window of `ms`, as % of one core. */
function pct(cpu_s: number, ms: number): number {
  return round1(((cpu_s * 1000) / ms) * 100);
}

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}
