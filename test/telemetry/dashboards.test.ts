/**
 * The Grafana dashboards against a real Prometheus (the Debian package) scraping a real edge in front
 * of the demo worlds under load: every query of every panel returns data, every metric a dashboard
 * names is exported, and every metric the edge defines is on a dashboard.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { startDemoWorld, type RunningDemoWorld } from '../../src/demo/index.js';
import { EdgeMetrics } from '../../src/telemetry/metrics.js';
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
      const load = await EdgeLoad.start(edge);
      cleanups.push(() => load.close());
      const prom: TestPrometheus = await promStarting;
      await prom.waitForScrapes(2, 20_000);

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
        const missing = (await evaluate()).filter((r) => r.finite === 0);
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
        .filter((r) => r.finite === 0)
        .map((r) => `${r.q.dashboard} / ${r.q.panel} / ${r.q.refId}: ${r.q.expr}`);
      expect(empty, 'queries without data').toEqual([]);
      expect(results.length).toBeGreaterThan(40);

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
      const own = (await new EdgeMetrics({ defaults: false }).registry.getMetricsAsJSON()).map((m) => m.name);
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
  const edge = await startEdge(
    [
      { path: '/arm', upstream: arm.url, name: 'arm' },
      { path: '/grid', upstream: grid.url, name: 'grid' },
      // A world that is down: agents on this route count upstream failures.
      { path: '/gone', upstream: `ws://127.0.0.1:${await closedPort()}/`, name: 'gone' },
    ],
    {
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
