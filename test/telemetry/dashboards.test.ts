/**
 * The Grafana dashboards against a real Prometheus (the Debian package) scraping a real edge in front
 * of the demo worlds under load: every query of every panel returns data, every metric a dashboard
 * names is exported, and every metric the edge defines is on a dashboard.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { EdgeMetrics } from '../../src/telemetry/metrics.js';
import { RecorderMetrics } from '../../src/telemetry/recorder-metrics.js';
import { startEdge, type TestEdge } from '../support/edge.js';
import { startPrometheus, type TestPrometheus } from '../support/prometheus.js';
import {
  GRAFANA_DIR,
  allPanels,
  dashboardProblems,
  exposedSampleNames,
  loadDashboards,
  metricNames,
  queriesOf,
  substitute,
} from './grafana.js';
import { EdgeLoad } from './load.js';

const dashboards = loadDashboards();

/** What Grafana would put in for "All" and its interval variables, over a window covering the whole run. */
const VARIABLES: Readonly<Record<string, string>> = {
  job: '.*',
  instance: '.*',
  route: '.*',
  channel: '.*',
  __rate_interval: '1m',
  __interval: '1s',
  __range: '5m',
};

/**
 * On uWebSockets.js the edge also has a stream listener (`stream_listen`: observers' stream connections on
 * a worker thread), so its panels have data; on `ws` there can be none, and they may be empty.
 */
const STREAM_LISTENER = (process.env.AWP_EDGE_ENGINE ?? 'ws') === 'uws';
const STREAM_LISTENER_PANELS = ['Stream worker: '];

const ROUNDS = 6;
const ROUND_SPACING_MS = 1200;
/** Bound on the load phase when panels still lack data after ROUNDS rounds. */
const LOAD_BUDGET_MS = 30_000;

describe('Grafana dashboards (grafana/)', () => {
  it('are four importable Grafana dashboards with unique uids', () => {
    expect(dashboards.map((d) => d.dashboard.uid).sort()).toEqual([
      'awp-edge-fanout',
      'awp-edge-latency',
      'awp-edge-overview',
      'awp-edge-sessions',
    ]);
    expect(new Set(dashboards.map((d) => d.dashboard.title)).size).toBe(dashboards.length);
    for (const { dashboard } of dashboards) {
      expect(dashboardProblems(dashboard)).toEqual([]);
      expect(allPanels(dashboard).filter((p) => p.type !== 'row').length).toBeGreaterThanOrEqual(8);
    }
  });

  it('have provisioning files that load them from the path the README names', () => {
    const provider = parse(
      readFileSync(join(GRAFANA_DIR, 'provisioning/dashboards/awp-edge.yaml'), 'utf8'),
    ) as {
      apiVersion: number;
      providers: { type: string; options: { path: string } }[];
    };
    expect(provider.apiVersion).toBe(1);
    expect(provider.providers).toHaveLength(1);
    const p = provider.providers[0]!;
    expect(p.type).toBe('file');
    expect(p.options.path).toMatch(/^\//);
    const ds = parse(readFileSync(join(GRAFANA_DIR, 'provisioning/datasources/prometheus.yaml'), 'utf8')) as {
      apiVersion: number;
      datasources: { type: string; access: string; url: string }[];
    };
    expect(ds.apiVersion).toBe(1);
    expect(ds.datasources).toHaveLength(1);
    expect(ds.datasources[0]).toMatchObject({ type: 'prometheus', access: 'proxy' });
    expect(typeof ds.datasources[0]!.url).toBe('string');
    const readme = readFileSync(join(GRAFANA_DIR, 'README.md'), 'utf8');
    expect(readme).toContain(p.options.path);
  });

  it('name metrics the way the parser used below finds them', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (route, le) (rate(awp_edge_forward_latency_seconds_bucket{route=~"$route", le!="1e-5"}[1m])))',
      ),
    ).toEqual(['awp_edge_forward_latency_seconds_bucket']);
    expect(metricNames('sum(rate(a_total[5m] offset 1m)) by (x) / on (x) group_left b + 1e-9')).toEqual([
      'a_total',
      'b',
    ]);
  });

  describe('against Prometheus scraping the edge under load', () => {
    const cleanups: (() => Promise<void> | void)[] = [];
    afterAll(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });

    it('every query of every panel returns data, and every metric named is exported', async () => {
      const started = performance.now();
      const { edge } = await edgeInFrontOfDemoWorlds(cleanups);
      // Prometheus starts while the load connects; it is stopped even if the load fails to start.
      const promStarting = startPrometheus({
        targets: [`127.0.0.1:${edge.edge.adminPort}`],
        scrapeIntervalMs: 1000,
      });
      cleanups.push(async () => (await promStarting.catch(() => undefined))?.stop());
      const loadStarted = performance.now();
      const load = await EdgeLoad.start(edge);
      cleanups.push(() => load.close());
      const prom: TestPrometheus = await promStarting;
      await prom.waitForScrapes(2, 20_000);
      // One credential reload (an operator's SIGHUP), after scrapes saw the counter at 0: a success.
      expect(edge.edge.reloadCredentials('signal').ok).toBe(true);

      const queries = dashboards.flatMap(({ dashboard }) => queriesOf(dashboard));
      /** Each query's series: how many, how many with a finite value, the largest value. */
      const evaluate = () =>
        Promise.all(
          queries.map(async (q) => {
            const values = (await prom.query(substitute(q.expr, VARIABLES))).map((s) => Number(s.value));
            const finite = values.filter((v) => Number.isFinite(v));
            return {
              q,
              series: values.length,
              finite: finite.length,
              max: finite.length > 0 ? Math.max(...finite) : NaN,
            };
          }),
        );
      // At least ROUNDS rounds; more (bounded) while some panel has no data yet: on a busy machine the
      // slow observers take longer to overflow.
      const loadEnd = performance.now() + LOAD_BUDGET_MS;
      let rounds = 0;
      for (;;) {
        await load.round();
        rounds++;
        await sleep(ROUND_SPACING_MS);
        if (rounds < ROUNDS) continue;
        const missing = (await evaluate()).filter((r) => r.finite === 0 && !mayBeEmpty(r.q.panel));
        if (missing.length === 0 || performance.now() > loadEnd) break;
        console.log(
          `after ${rounds} rounds, ${missing.length} queries without data yet: ${missing.map((r) => r.q.panel).join('; ')}`,
        );
      }
      // Two more scrapes after the last round, so the last counters are in.
      const scrapes = await prom.waitForScrapes((await prom.scrapes()) + 2, 10_000);
      console.log(`load: ${rounds} rounds ${JSON.stringify(load.counts)}; ${scrapes} scrapes`);
      expect(load.counts.refusedByEdge).toBeGreaterThan(0);
      expect(load.counts.refusedByWorld).toBe(rounds);
      expect(load.counts.relayResumes).toBe(rounds);
      expect(load.counts.observerResumes).toBe(rounds);
      expect(load.counts.unknownTokenResumes).toBe(rounds);
      expect(load.counts.upstreamFailures).toBe(rounds);

      // Template variables: each label_values query finds values.
      const report: string[] = [];
      const selectors: string[] = [];
      for (const { dashboard } of dashboards) {
        for (const v of dashboard.templating.list) {
          if (v.type !== 'query') continue;
          const m = /^label_values\((?:(.+),\s*)?(\w+)\)$/.exec(substitute(v.query as string, VARIABLES));
          expect(m, `${dashboard.uid} $${v.name}`).not.toBeNull();
          if (m![1] !== undefined) selectors.push(m![1]);
          const values = await prom.labelValues(m![2]!, m![1] !== undefined ? [m![1]] : []);
          report.push(`${dashboard.uid} $${v.name} = ${values.join(', ')}`);
          expect(values.length, `${dashboard.uid} $${v.name}`).toBeGreaterThan(0);
        }
      }

      // Every panel query: at least one series with a finite value.
      const results = await evaluate();
      for (const r of results) {
        report.push(
          `${String(r.series).padStart(3)} series, ${String(r.finite).padStart(3)} finite, max ${r.max.toPrecision(3).padStart(9)}  ${r.q.dashboard} / ${r.q.panel} / ${r.q.refId}`,
        );
      }
      console.log(report.join('\n'));
      const empty = results
        .filter((r) => r.finite === 0 && !mayBeEmpty(r.q.panel))
        .map((r) => `${r.q.dashboard} / ${r.q.panel} / ${r.q.refId}: ${r.q.expr}`);
      expect(empty, 'queries without data').toEqual([]);
      expect(results.length).toBeGreaterThan(40);

      await checkValues(prom, load, rounds, (performance.now() - loadStarted) / 1000);
      await checkDeployQueries(prom);

      // Every metric a dashboard names is exported on /metrics.
      const exposition = await (await fetch(`${edge.adminUrl}/metrics`)).text();
      const exported = exposedSampleNames(exposition);
      const named = new Set(
        dashboards.flatMap(({ dashboard }) => queriesOf(dashboard).flatMap((q) => metricNames(q.expr))),
      );
      for (const sel of selectors) for (const n of metricNames(sel)) named.add(n);
      expect(
        [...named].filter((n) => !exported.has(n)),
        'named by a dashboard, not exported',
      ).toEqual([]);

      // Every metric the edge defines is on some dashboard.
      const defined = new EdgeMetrics({ defaults: false });
      RecorderMetrics.for(defined.registry); // the flight recorder's (registered where a route records)
      const own = (await defined.registry.getMetricsAsJSON()).map((m) => m.name);
      const shown = (name: string) =>
        [name, `${name}_bucket`, `${name}_sum`, `${name}_count`].some((n) => named.has(n));
      expect(
        own.filter((n) => !shown(n)),
        'defined by the edge, on no dashboard',
      ).toEqual([]);
      console.log(
        `${results.length} queries, ${named.size} metric names, ${own.length} edge metrics; ${Math.round(performance.now() - started)} ms`,
      );
    }, 90_000);
  });
});

/** A panel whose data needs a stream listener, on an edge that has none. */
function mayBeEmpty(panel: string): boolean {
  return !STREAM_LISTENER && STREAM_LISTENER_PANELS.some((p) => panel.startsWith(p));
}

/** A panel's query (by dashboard uid, the start of its panel title and refId). */
function panelQuery(uid: string, title: string, refId = 'A'): string {
  const q = dashboards
    .flatMap(({ dashboard }) => queriesOf(dashboard))
    .find((x) => x.dashboard === uid && x.panel.startsWith(title) && x.refId === refId);
  if (q === undefined) throw new Error(`no query ${uid} / ${title} / ${refId}`);
  return q.expr;
}

/**
 * Key panels' values against what the load counted itself, each panel evaluated over a window covering
 * the whole run (so a rate times the window is the run's total). Bands are generous: Prometheus
 * extrapolates rates at the window's edges, and frames in flight at the last scrape are not counted.
 */
async function checkValues(
  prom: TestPrometheus,
  load: EdgeLoad,
  rounds: number,
  runS: number,
): Promise<void> {
  const windowS = Math.ceil(runS) + 10;
  const whole = { ...VARIABLES, __rate_interval: `${windowS}s`, __range: `${windowS}s` };
  const report: string[] = [];
  const values = async (uid: string, title: string, refId = 'A') => {
    const v = (await prom.query(substitute(panelQuery(uid, title, refId), whole))).map((s) => ({
      labels: s.metric,
      value: Number(s.value),
    }));
    report.push(
      `${uid} / ${title} / ${refId}: ${v.map((x) => `${JSON.stringify(x.labels)}=${x.value.toPrecision(4)}`).join('  ')}`,
    );
    return v;
  };
  const where = (v: { labels: Record<string, string>; value: number }[], labels: Record<string, string>) =>
    v.filter((x) => Object.entries(labels).every(([k, want]) => x.labels[k] === want)).map((x) => x.value);
  const one = (v: { labels: Record<string, string>; value: number }[], labels: Record<string, string>) => {
    const found = where(v, labels);
    expect(found, JSON.stringify(labels)).toHaveLength(1);
    return found[0]!;
  };
  /** Within [lo, hi] times the load's own count: generous, the counts are exact but rates extrapolate. */
  const near = (value: number, count: number, what: string, lo = 0.5, hi = 1.5) => {
    expect(value, `${what}: ${value} against the load's ${count}`).toBeGreaterThanOrEqual(count * lo);
    expect(value, `${what}: ${value} against the load's ${count}`).toBeLessThanOrEqual(count * hi);
  };

  const grid = load.gridFramesReceived();
  report.push(`load: grid inline frames ${JSON.stringify(grid)}; ${rounds} rounds; window ${windowS} s`);
  expect(grid.observer).toBeGreaterThan(100);

  // Frames forwarded on the grid route (a relay agent and a hub observer, both reading every frame):
  // the rate over the run times its length is what the two clients received.
  const forwarded = await values('awp-edge-overview', 'Frames forwarded /s by route');
  near(one(forwarded, { route: 'grid' }) * windowS, grid.all, 'grid frames forwarded', 0.7, 1.3);
  // Received from the world (once, before fan-out) by the grid's hub, whose one observer got them all.
  const received = await values('awp-edge-fanout', 'Frames /s by channel and outcome', 'B');
  near(
    one(received, { route: 'grid', channel: 'grid_view' }) * windowS,
    grid.observer,
    'grid frames received',
    0.7,
    1.3,
  );

  // Shares are of per-subscriber outcomes only: 0 on the grid (nothing dropped, replaced or
  // downsampled), a share in (0, 1) for the arm's downsampled proprio, every one within [0, 1].
  const share = await values('awp-edge-fanout', 'Share of frames not forwarded by channel');
  for (const v of share) expect(v.value, JSON.stringify(v.labels)).toBeGreaterThanOrEqual(0);
  for (const v of share) expect(v.value, JSON.stringify(v.labels)).toBeLessThanOrEqual(1);
  expect(one(share, { route: 'grid', channel: 'grid_view' })).toBe(0);
  const proprio = one(share, { route: 'arm', channel: 'proprio' });
  expect(proprio).toBeGreaterThan(0);
  expect(proprio).toBeLessThan(1);
  // Bytes dropped: the arm's slow observers, never the grid's.
  const dropped = await values('awp-edge-fanout', 'Bytes dropped /s (slow subscribers, malformed)');
  expect(where(dropped, { route: 'grid' }).filter((x) => x !== 0)).toEqual([]);
  expect(one(dropped, { route: 'arm', outcome: 'dropped_slow' })).toBeGreaterThan(0);

  // Each thread's busy share is a share; the stream worker's is there when the edge has a stream listener,
  // and then its batches were carried out within the run.
  const busy = await values('awp-edge-overview', 'Event-loop busy share by thread');
  for (const v of busy) expect(v.value, JSON.stringify(v.labels)).toBeGreaterThan(0);
  for (const v of busy) expect(v.value, JSON.stringify(v.labels)).toBeLessThanOrEqual(1.05);
  expect(busy.map((v) => v.labels.thread).sort()).toEqual(
    STREAM_LISTENER ? ['main', 'stream_worker'] : ['main'],
  );
  if (STREAM_LISTENER) {
    const batch = await values('awp-edge-overview', 'Stream worker: batch hand-over', 'B');
    expect(batch).toHaveLength(1);
    expect(batch[0]!.value).toBeGreaterThan(0);
    expect(batch[0]!.value).toBeLessThan(windowS);
  }

  // One replica, ready, its store reachable.
  for (const refId of ['A', 'B', 'C'])
    expect(
      (await values('awp-edge-overview', 'Replicas: scraped, ready, store reachable', refId)).map(
        (x) => x.value,
      ),
    ).toEqual([1]);

  // The one reload, successful; the credentials' age is within the run.
  expect((await values('awp-edge-overview', 'Credential reloads', 'A')).map((x) => x.value)).toEqual([1]);
  const reloads = await values('awp-edge-overview', 'Credential reloads', 'B');
  near(one(reloads, { result: 'success' }), 1, 'credential reloads');
  expect(one(reloads, { result: 'failure' })).toBe(0);
  for (const age of await values('awp-edge-overview', 'Age of the credentials in use')) {
    expect(age.value).toBeGreaterThanOrEqual(0);
    expect(age.value).toBeLessThan(windowS + 60);
  }

  // Counts over the range against the load's own.
  const refusals = await values('awp-edge-sessions', 'Refusals in range by reason');
  near(one(refusals, { reason: 'max_action_rate_hz' }), load.counts.refusedByEdge, 'rate-limit refusals');
  const resumes = await values('awp-edge-sessions', 'Resumes in range by outcome');
  near(one(resumes, { kind: 'relay', outcome: 'resumed' }), load.counts.relayResumes, 'relay resumes');
  near(
    one(resumes, { kind: 'observer', outcome: 'resumed' }),
    load.counts.observerResumes,
    'observer resumes',
  );
  near(
    one(resumes, { kind: 'relay', outcome: 'unknown_token' }),
    load.counts.unknownTokenResumes,
    'stray resumes',
  );
  const failures = await values('awp-edge-sessions', 'Upstream failures in range');
  near(
    one(failures, { route: 'gone', kind: 'control', reason: 'unreachable' }),
    load.counts.upstreamFailures,
    'upstream failures',
  );
  console.log(report.join('\n'));
}

const DEPLOY_COMPONENTS = join(import.meta.dirname, '..', '..', 'deploy', 'kustomize', 'components');

/**
 * The deploy components' PromQL against this Prometheus (its job is `awp-edge`, as the ServiceMonitor's):
 * every alert expression evaluates, and those whose answer the load fixes give it (the edge is up, ready,
 * its store reachable; the route whose world is down fails upstream); prometheus-adapter's queries, as the
 * adapter expands them, give the per-target sums the autoscaler would read.
 */
async function checkDeployQueries(prom: TestPrometheus): Promise<void> {
  const rule = parse(
    readFileSync(join(DEPLOY_COMPONENTS, 'prometheus-rules', 'prometheusrule.yaml'), 'utf8'),
  ) as {
    spec: { groups: { rules: { alert: string; expr: string }[] }[] };
  };
  const firing = new Map<string, Record<string, string>[]>();
  for (const r of rule.spec.groups.flatMap((g) => g.rules)) {
    firing.set(
      r.alert,
      (await prom.query(r.expr)).map((s) => s.metric),
    );
  }
  console.log(
    `alerts against the load: ${[...firing].map(([a, f]) => `${a} ${f.length === 0 ? 'quiet' : JSON.stringify(f)}`).join('; ')}`,
  );
  for (const quiet of [
    'AwpEdgeDown',
    'AwpEdgeAbsent',
    'AwpEdgeNotReady',
    'AwpEdgeStoreUnavailable',
    'AwpEdgeCredentialReloadFailed',
  ])
    expect(firing.get(quiet), quiet).toEqual([]);
  expect(firing.get('AwpEdgeUpstreamFailures')?.map((m) => m.route)).toEqual(['gone']);
  expect(firing.get('AwpEdgeFramesDropped')?.filter((m) => m.route === 'grid')).toEqual([]);

  const adapter = parse(
    readFileSync(join(DEPLOY_COMPONENTS, 'prometheus-adapter', 'adapter-config.yaml'), 'utf8'),
  ) as {
    data: Record<string, string>;
  };
  const rules = (
    parse(adapter.data['config.yaml']!) as { rules: { name: { as: string }; metricsQuery: string }[] }
  ).rules;
  for (const r of rules) {
    const expanded = r.metricsQuery
      .replace('<<.Series>>', r.name.as)
      .replace('<<.LabelMatchers>>', 'job="awp-edge"')
      .replace('<<.GroupBy>>', 'instance');
    const perTarget = await prom.query(expanded);
    const total = await prom.query(`sum(${r.name.as})`);
    expect(perTarget, expanded).toHaveLength(1);
    expect(Number(perTarget[0]!.value), expanded).toBe(Number(total[0]!.value));
    expect(Number(perTarget[0]!.value), expanded).toBeGreaterThan(0);
  }
}

async function edgeInFrontOfDemoWorlds(
  cleanups: (() => Promise<void> | void)[],
): Promise<{ edge: TestEdge; arm: RunningDemoWorld }> {
  // The arm's state channel at a high rate and large camera frames: an observer that stops reading
  // fills its socket with camera frames, then overflows its queue with reliable state frames in seconds.
  const arm = await startDemoWorld({
    kind: 'arm',
    host: '127.0.0.1',
    port: 0,
    stateHz: 500,
    cameraBytes: 1 << 18,
  });
  cleanups.push(() => arm.close());
  const grid = await startDemoWorld({ kind: 'grid', host: '127.0.0.1', port: 0 });
  cleanups.push(() => grid.close());
  const recordings = mkdtempSync(join(tmpdir(), 'awp-dashboards-recordings-'));
  cleanups.push(() => rmSync(recordings, { recursive: true, force: true }));
  const edge = await startEdge(
    [
      { path: '/arm', upstream: arm.url, name: 'arm' },
      // Recorded: the flight recorder's panels (a lockstep agent ticks the grid, observers watch it).
      { path: '/grid', upstream: grid.url, name: 'grid', record: { dir: recordings } },
      // A world that is down: agents on this route count upstream failures.
      { path: '/gone', upstream: `ws://127.0.0.1:${await closedPort()}/`, name: 'gone' },
    ],
    {
      ...(STREAM_LISTENER && { stream_listen: '127.0.0.1:0' }),
      // No hop pings: paused test clients stay connected until the edge's own queues decide.
      timing: { hop_ping_interval_ms: 0 },
      transport: { high_water_bytes: 16_384, max_queued_bytes: 65_536 },
    },
  );
  cleanups.push(() => edge.close());
  return { edge, arm };
}

/** A loopback port nothing listens on (bound, then released). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 9));
    });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
