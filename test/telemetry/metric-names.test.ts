/**
 * Metric names operators' tooling expects: the default process metrics under their standard names
 * (stock Node.js dashboards and alerts), prefixed only when `metrics.process_prefix` says so; frames
 * received from worlds in their own counter, not among the per-subscriber outcomes.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, validateConfig } from '../../src/config/load.js';
import { FrameMetrics, MAX_CHANNEL_LABELS, OTHER_CHANNELS } from '../../src/telemetry/frame-metrics.js';
import { EdgeMetrics } from '../../src/telemetry/metrics.js';
import { RecorderMetrics } from '../../src/telemetry/recorder-metrics.js';
import { exposedSampleNames } from './grafana.js';

const ROUTES = [{ name: 'arm', path: '/arm', upstream: 'ws://127.0.0.1:1/' }];

describe('metric names', () => {
  it("the README's Operations table names every metric the edge defines, and no other", async () => {
    const readme = readFileSync(join(import.meta.dirname, '..', '..', 'README.md'), 'utf8');
    const ops = readme.slice(readme.indexOf('\n## Operations\n'));
    const table = ops.slice(0, ops.indexOf('\n- **', ops.indexOf('| metric')));
    const listed = new Set([...table.matchAll(/`(awp_edge_[a-z_]+)`/g)].map((m) => m[1]!));
    const metrics = new EdgeMetrics({ defaults: false });
    RecorderMetrics.for(metrics.registry); // the flight recorder's (registered where a route records)
    const own = (await metrics.registry.getMetricsAsJSON()).map((m) => m.name);
    expect(
      own.filter((n) => !listed.has(n)),
      'defined, not in the README',
    ).toEqual([]);
    expect(
      [...listed].filter((n) => !own.includes(n)),
      'in the README, not defined',
    ).toEqual([]);
    expect(table).toContain('`process_*`, `nodejs_*`');
  });

  it('process and Node.js defaults keep their standard names', async () => {
    const names = exposedSampleNames((await new EdgeMetrics().exposition()).body);
    for (const n of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'process_start_time_seconds',
      'nodejs_eventloop_lag_p99_seconds',
      'nodejs_heap_size_used_bytes',
    ])
      expect(names.has(n), n).toBe(true);
    expect(
      [...names].filter((n) => n.startsWith('awp_edge_process_') || n.startsWith('awp_edge_nodejs_')),
    ).toEqual([]);
  });

  it('metrics.process_prefix prefixes them, and is validated', async () => {
    const config = validateConfig(
      { routes: ROUTES, agents: { tokens: ['t'] }, metrics: { process_prefix: 'awp_edge_' } },
      'edge.yaml',
      {},
    );
    expect(config.metrics?.process_prefix).toBe('awp_edge_');
    const names = exposedSampleNames(
      (await new EdgeMetrics({ processPrefix: config.metrics?.process_prefix }).exposition()).body,
    );
    expect(names.has('awp_edge_process_cpu_seconds_total')).toBe(true);
    expect(names.has('process_cpu_seconds_total')).toBe(false);
    expect(
      validateConfig({ routes: ROUTES, agents: { tokens: ['t'] } }, 'edge.yaml', {}).metrics?.process_prefix,
    ).toBe('');
    expect(() =>
      validateConfig(
        { routes: ROUTES, agents: { tokens: ['t'] }, metrics: { process_prefix: 'bad-prefix' } },
        'edge.yaml',
        {},
      ),
    ).toThrow(ConfigError);
  });

  it('frames received from a world are their own counter; frames_total holds per-subscriber outcomes', async () => {
    const metrics = new EdgeMetrics({ defaults: false });
    const m = FrameMetrics.for(metrics, 'arm', 'inline', 'world_to_agent', () => 0);
    m.received('proprio', 100);
    m.count('proprio', 'forwarded', 100);
    m.count('proprio', 'forwarded', 100);
    m.count('proprio', 'downsampled', 100);
    const text = (await metrics.exposition()).body;
    expect(text).toContain('awp_edge_frames_received_total{route="arm",channel="proprio"} 1');
    expect(text).toContain('awp_edge_frames_received_bytes_total{route="arm",channel="proprio"} 100');
    const outcomes = (await metrics.frames.get()).values.map((v) => [v.labels.outcome, v.value]);
    expect(outcomes.sort()).toEqual([
      ['downsampled', 1],
      ['forwarded', 2],
    ]);
  });

  it('a world naming more channels than MAX_CHANNEL_LABELS gets no more series: the rest count under (other)', async () => {
    const metrics = new EdgeMetrics({ defaults: false });
    const m = FrameMetrics.for(metrics, 'arm', 'inline', 'world_to_agent', () => 0);
    const extra = 50;
    for (let i = 0; i < MAX_CHANNEL_LABELS + extra; i++) {
      const channel = `c${i}`;
      m.received(channel, 10);
      m.observeAge(channel, 1, 2, 3);
      m.written({ received_at: 0, channel }, 10);
      m.count(channel, 'dropped_slow', 10);
    }
    m.written({ received_at: 0, channel: 'c0' }, 10); // a labelled channel keeps its label
    await metrics.exposition(); // counts are folded in at a scrape
    const channels = async (metric: { get(): Promise<{ values: { labels: Record<string, unknown> }[] }> }) =>
      new Set((await metric.get()).values.map((v) => String(v.labels.channel)));
    for (const metric of [
      metrics.framesReceived,
      metrics.frames,
      metrics.forwardLatency,
      metrics.pipelineLatency,
    ]) {
      const seen = await channels(metric);
      expect(seen.size).toBe(MAX_CHANNEL_LABELS + 1);
      expect(seen.has(OTHER_CHANNELS)).toBe(true);
    }
    const received = (await metrics.framesReceived.get()).values;
    expect(received.find((v) => v.labels.channel === OTHER_CHANNELS)?.value).toBe(extra);
    const forwarded = (await metrics.frames.get()).values.filter((v) => v.labels.outcome === 'forwarded');
    expect(forwarded.find((v) => v.labels.channel === 'c0')?.value).toBe(2);
    expect(forwarded.find((v) => v.labels.channel === OTHER_CHANNELS)?.value).toBe(extra);
  });
});
