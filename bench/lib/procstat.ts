/**
 * CPU and memory of other processes, read from /proc (what pidusage does, without the package): CPU
 * time from /proc/<pid>/stat (utime + stime, in clock ticks), RSS from /proc/<pid>/status (VmRSS).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

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

/** A thread's time (s) on a CPU and waiting for one (runnable, on a run queue): /proc/.../schedstat. */
interface ThreadTime {
  cpu: number;
  wait: number;
}

/** Each thread's times by name (Node names its main thread, V8's helpers and workers), same names summed. */
function threadTimes(pid: number): Map<string, ThreadTime> {
  const out = new Map<string, ThreadTime>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const [cpu, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
      const t = out.get(name) ?? { cpu: 0, wait: 0 };
      t.cpu += cpu! / 1e9;
      t.wait += wait! / 1e9;
      out.set(name, t);
    }
  } catch {
    // a thread (or the process) that ended meanwhile: what was read stands
  }
  return out;
}

function sumWait(threads: Map<string, ThreadTime>): number {
  let wait = 0;
  for (const t of threads.values()) wait += t.wait;
  return wait;
}

/** The machine's CPU time so far (/proc/stat, clock ticks over all cores): all of it, idle, stolen. */
function machineTicks(): { all: number; idle: number; steal: number } | undefined {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal guest guest_nice (guest time is in user already)
    return { all: f.slice(0, 8).reduce((a, b) => a + b, 0), idle: f[3]! + f[4]!, steal: f[7]! };
  } catch {
    return undefined;
  }
}

/** The whole machine over a window, % of one core (2 cores all busy: 200). */
export interface MachineSummary {
  /** Time some process or the kernel ran. */
  readonly busy_pct: number;
  /** Time the hypervisor gave this VM's CPUs to others. */
  readonly steal_pct: number;
}

export interface ProcSummary {
  readonly pid: number;
  /** CPU over the window, % of one core. */
  readonly cpu_pct: number;
  /** The main thread's share of it (the rest: GC helper threads and the libuv pool). */
  readonly main_thread_cpu_pct: number;
  /**
   * By thread name, those over 1 % of a core (e.g. MainThread, V8Worker: GC helpers, stream-worker): on a
   * CPU, and runnable but waiting for one (what the machine's other work took from it).
   */
  readonly threads: Record<string, { cpu_pct: number; runqueue_wait_pct: number }>;
  /** All its threads' time runnable but waiting for a CPU, % of one core. */
  readonly runqueue_wait_pct: number;
  readonly rss_mib_mean: number;
  readonly rss_mib_max: number;
}

/** Samples a set of processes' RSS every `intervalMs` and their CPU over the whole window. */
export class ProcSampler {
  private readonly start = new Map<
    string,
    { cpu: number; main: number; threads: Map<string, ThreadTime>; at: number }
  >();
  private readonly rss = new Map<string, number[]>();
  private timer: NodeJS.Timeout | undefined;
  private machineStart: (ReturnType<typeof machineTicks> & { at: number }) | undefined;
  /** After `end`: the machine over the window. */
  machine: MachineSummary | undefined;

  constructor(
    private readonly pids: Readonly<Record<string, number>>,
    private readonly intervalMs = 250,
  ) {}

  begin(): void {
    const at = performance.now();
    for (const [name, pid] of Object.entries(this.pids)) {
      const r = readProc(pid);
      this.start.set(name, {
        cpu: r?.cpu_s ?? 0,
        main: r?.main_thread_cpu_s ?? 0,
        threads: threadTimes(pid),
        at,
      });
      this.rss.set(name, r !== undefined ? [r.rss_bytes] : []);
    }
    const m = machineTicks();
    this.machineStart = m && { ...m, at };
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
    const m0 = this.machineStart;
    const m1 = machineTicks();
    if (m0 !== undefined && m1 !== undefined) {
      const share = (ticks: number) => pct(ticks / clockTicks(), now - m0.at);
      this.machine = {
        busy_pct: share(m1.all - m0.all - (m1.idle - m0.idle)),
        steal_pct: share(m1.steal - m0.steal),
      };
    }
    const out: Record<string, ProcSummary> = {};
    for (const [name, pid] of Object.entries(this.pids)) {
      const s = this.start.get(name)!;
      const r = readProc(pid);
      const threads = threadTimes(pid);
      const samples = this.rss.get(name) ?? [];
      const mean = samples.reduce((a, b) => a + b, 0) / Math.max(1, samples.length);
      out[name] = {
        pid,
        cpu_pct: r === undefined ? NaN : pct(r.cpu_s - s.cpu, now - s.at),
        main_thread_cpu_pct: r === undefined ? NaN : pct(r.main_thread_cpu_s - s.main, now - s.at),
        threads: Object.fromEntries(
          [...threads].flatMap(([thread, t]) => {
            const t0 = s.threads.get(thread) ?? { cpu: 0, wait: 0 };
            const cpu_pct = pct(t.cpu - t0.cpu, now - s.at);
            const runqueue_wait_pct = pct(t.wait - t0.wait, now - s.at);
            return cpu_pct >= 1 ? [[thread, { cpu_pct, runqueue_wait_pct }]] : [];
          }),
        ),
        runqueue_wait_pct: pct(sumWait(threads) - sumWait(s.threads), now - s.at),
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
