/**
 * A real Prometheus for tests (the Debian package's /usr/bin/prometheus): loopback only, a free port,
 * its own temp config and data dir, scraping the given targets at a short interval, bounded waits,
 * and always stopped: by stop() in afterAll, or when the test process ends in any way (a watchdog
 * shell stops Prometheus when the pipe from this process closes).
 *
 *   const prom = await startPrometheus({ targets: [`127.0.0.1:${edge.adminPort}`] });
 *   await prom.waitForScrapes(5, 20_000);
 *   const series = await prom.query('sum by (route) (rate(awp_edge_frames_total[1m]))');
 *   await prom.stop();
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

export const PROMETHEUS_BIN = process.env.AWP_TEST_PROMETHEUS ?? '/usr/bin/prometheus';

export interface PrometheusOptions {
  /** `host:port` of each target; all on loopback. */
  readonly targets: readonly string[];
  readonly jobName?: string;
  readonly metricsPath?: string;
  /** Scrape (and rule evaluation) interval (default 1000 ms). */
  readonly scrapeIntervalMs?: number;
  /** Bound on /-/ready answering after start (default 20000 ms). */
  readonly startTimeoutMs?: number;
}

/** One series of an instant query. */
export interface PromSample {
  readonly metric: Record<string, string>;
  /** The value as Prometheus renders it ("NaN", "+Inf" included). */
  readonly value: string;
}

export interface TestPrometheus {
  /** Base URL of the HTTP API, e.g. `http://127.0.0.1:39123`. */
  readonly url: string;
  readonly port: number;
  readonly jobName: string;
  /** Instant query (`/api/v1/query`); throws on a PromQL error. Scalars come back as one sample. */
  query(expr: string, time?: Date): Promise<PromSample[]>;
  /** `/api/v1/label/<label>/values`, optionally restricted by series selectors. */
  labelValues(label: string, match?: readonly string[]): Promise<string[]>;
  /** Successful scrapes so far of the target scraped least (0 before the first). */
  scrapes(): Promise<number>;
  /** Waits until every target was scraped successfully at least `n` times (bounded); returns the count. */
  waitForScrapes(n: number, timeoutMs: number): Promise<number>;
  /** What Prometheus wrote to stdout/stderr (for failure messages). */
  output(): string;
  /** Stops the server (SIGTERM, then SIGKILL after 5 s) and removes its dir. */
  stop(): Promise<void>;
}

export function prometheusAvailable(): boolean {
  return existsSync(PROMETHEUS_BIN);
}

export async function startPrometheus(options: PrometheusOptions): Promise<TestPrometheus> {
  if (!prometheusAvailable()) {
    throw new Error(`${PROMETHEUS_BIN} not found: install the Debian package (apt-get install prometheus)`);
  }
  for (const t of options.targets) {
    if (!/^127\.0\.0\.1:\d+$/.test(t)) throw new Error(`targets must be 127.0.0.1:PORT, got ${t}`);
  }
  // A free port can be taken between our probe and Prometheus binding it: retry a few times.
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await launch(options, await freePort());
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError;
}

async function launch(options: PrometheusOptions, port: number): Promise<TestPrometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'awp-edge-prometheus-'));
  const jobName = options.jobName ?? 'awp-edge';
  const interval = `${options.scrapeIntervalMs ?? 1000}ms`;
  const config = join(dir, 'prometheus.yml');
  // JSON is YAML: no quoting surprises in target lists.
  writeFileSync(
    config,
    JSON.stringify({
      global: { scrape_interval: interval, scrape_timeout: interval, evaluation_interval: interval },
      scrape_configs: [
        {
          job_name: jobName,
          metrics_path: options.metricsPath ?? '/metrics',
          static_configs: [{ targets: options.targets }],
        },
      ],
    }),
  );
  const args = [
    `--config.file=${config}`,
    `--storage.tsdb.path=${join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`,
    '--storage.tsdb.retention.time=1h',
    '--log.level=warn',
  ];
  // Through a small shell that stops Prometheus when its stdin closes: when this process ends in any
  // way (a killed test worker runs no exit hooks), the pipe closes and Prometheus is stopped.
  const child = spawn('/bin/sh', ['-c', WATCHDOG, PROMETHEUS_BIN, ...args], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let pid: number | undefined;
  const collect = (d: Buffer) => {
    const text = d.toString();
    const m = /awp-test-prometheus-pid (\d+)/.exec(text);
    if (m !== null) pid = Number(m[1]);
    if (out.length < 64 * 1024) out += text;
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.stdin.end(); // the watchdog sends SIGTERM
      const timer = setTimeout(() => {
        if (pid !== undefined) killQuietly(pid);
        child.kill('SIGKILL');
      }, 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + (options.startTimeoutMs ?? 20_000);
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await stop();
      throw new Error(`prometheus exited during start (code ${child.exitCode}):\n${out}`);
    }
    if (await isReady(url)) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`prometheus not ready within ${options.startTimeoutMs ?? 20_000} ms:\n${out}`);
    }
    await sleep(100);
  }

  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await res.json()) as { status: string; data?: T; error?: string; errorType?: string };
    if (body.status !== 'success' || body.data === undefined) {
      throw new Error(`prometheus ${path}: ${body.errorType ?? res.status}: ${body.error ?? 'no data'}`);
    }
    return body.data;
  };

  const query = async (expr: string, time?: Date): Promise<PromSample[]> => {
    const params = new URLSearchParams({ query: expr });
    if (time !== undefined) params.set('time', String(time.getTime() / 1000));
    const data = await api<{ resultType: string; result: unknown }>(`/api/v1/query?${params.toString()}`);
    if (data.resultType === 'vector') {
      return (data.result as { metric: Record<string, string>; value: [number, string] }[]).map((s) => ({
        metric: s.metric,
        value: s.value[1],
      }));
    }
    if (data.resultType === 'scalar') return [{ metric: {}, value: (data.result as [number, string])[1] }];
    throw new Error(`prometheus query returned a ${data.resultType}, expected an instant vector: ${expr}`);
  };

  // `up` is written once per scrape, 1 when it succeeded: its sum over a long window counts successes.
  const scrapes = async (): Promise<number> => {
    const r = await query(`min(sum_over_time(up{job="${jobName}"}[1h]))`);
    return r.length === 0 ? 0 : Number(r[0]!.value);
  };

  return {
    url,
    port,
    jobName,
    query,
    labelValues: (label, match = []) => {
      const params = new URLSearchParams();
      for (const m of match) params.append('match[]', m);
      const q = params.toString();
      return api<string[]>(`/api/v1/label/${encodeURIComponent(label)}/values${q === '' ? '' : `?${q}`}`);
    },
    scrapes,
    waitForScrapes: async (n, timeoutMs) => {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const seen = await scrapes();
        if (seen >= n) return seen;
        if (Date.now() > end)
          throw new Error(`only ${seen} successful scrapes of ${jobName} after ${timeoutMs} ms:\n${out}`);
        await sleep(200);
      }
    },
    output: () => out,
    stop,
  };
}

/**
 * `sh -c WATCHDOG prometheus args...`: runs Prometheus (stdin from /dev/null), reports its pid on
 * stderr, and sends it SIGTERM once the shell's stdin reaches EOF; exits with Prometheus' status.
 */
const WATCHDOG = [
  'exec 3<&0',
  '"$0" "$@" </dev/null & p=$!',
  'echo "awp-test-prometheus-pid $p" >&2',
  '(while read -r _ <&3; do :; done; kill -TERM "$p" 2>/dev/null) & w=$!',
  'wait "$p"; s=$?',
  'kill "$w" 2>/dev/null',
  'exit "$s"',
].join('\n');

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

async function isReady(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) });
    return res.status === 200;
  } catch {
    return false;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
