/**
 * The PrometheusRule of deploy/kustomize/components/prometheus-rules, as rendered by kustomize:
 * `promtool check rules` accepts it (expressions and annotation templates parse), and
 * `promtool test rules` shows each alert firing on the series it is about and staying quiet on healthy
 * ones. (test/telemetry/dashboards.test.ts evaluates every expression against a Prometheus scraping an
 * edge under load.) promtool is the Debian package `prometheus`'s.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { kubectlAvailable, renderOverlay } from './render.js';

export const PROMTOOL = process.env.AWP_TEST_PROMTOOL ?? '/usr/bin/promtool';

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface Group {
  name: string;
  rules: Rule[];
}

/** An alert unit test: input series (promtool's expanding notation), then alerts expected at times. */
interface Case {
  readonly name: string;
  readonly series: Record<string, string>;
  readonly expect: { at: string; alert: string; firing: Record<string, string>[] }[];
}

const E = 'job="awp-edge", instance="10.0.0.1:9464", namespace="edge", pod="awp-edge-0"';
const POD = { job: 'awp-edge', instance: '10.0.0.1:9464', namespace: 'edge', pod: 'awp-edge-0' };

const CASES: Case[] = [
  {
    name: 'down: fires after 2 minutes without a scrape, not before',
    series: { [`up{${E}}`]: '1 1 0x10' },
    expect: [
      { at: '3m', alert: 'AwpEdgeDown', firing: [] },
      { at: '6m', alert: 'AwpEdgeDown', firing: [{ ...POD, severity: 'critical' }] },
      { at: '6m', alert: 'AwpEdgeAbsent', firing: [] },
    ],
  },
  {
    name: 'absent: no awp-edge target at all',
    series: { 'up{job="other", instance="x"}': '1x10' },
    expect: [{ at: '6m', alert: 'AwpEdgeAbsent', firing: [{ job: 'awp-edge', severity: 'critical' }] }],
  },
  {
    name: 'not ready: a drain (a minute) stays quiet, 5 minutes not ready fires',
    series: {
      [`awp_edge_ready{${E}}`]: '1 1 0 1x10',
      [`awp_edge_ready{job="awp-edge", instance="10.0.0.2:9464", namespace="edge", pod="awp-edge-1"}`]:
        '1 1 0x10',
    },
    expect: [
      {
        at: '8m',
        alert: 'AwpEdgeNotReady',
        firing: [{ ...POD, instance: '10.0.0.2:9464', pod: 'awp-edge-1', severity: 'warning' }],
      },
    ],
  },
  {
    name: 'store unavailable: a minute of store_up 0',
    series: { [`awp_edge_store_up{${E}, kind="redis"}`]: '1 0x5' },
    expect: [
      { at: '1m', alert: 'AwpEdgeStoreUnavailable', firing: [] },
      {
        at: '3m',
        alert: 'AwpEdgeStoreUnavailable',
        firing: [{ ...POD, kind: 'redis', severity: 'critical' }],
      },
    ],
  },
  {
    name: 'credential reload failed: a broken file for 5 minutes fires; one fixed within a minute does not',
    series: {
      [`awp_edge_config_last_reload_successful{${E}}`]: '1 1 0x10',
      [`awp_edge_config_last_reload_successful{job="awp-edge", instance="10.0.0.2:9464", namespace="edge", pod="awp-edge-1"}`]:
        '1 0 1x10',
    },
    expect: [
      { at: '4m', alert: 'AwpEdgeCredentialReloadFailed', firing: [] },
      { at: '8m', alert: 'AwpEdgeCredentialReloadFailed', firing: [{ ...POD, severity: 'warning' }] },
    ],
  },
  {
    name: 'upstream failures: one a minute to a world that is down fires; none stays quiet',
    series: {
      [`awp_edge_upstream_failures_total{${E}, route="gone", kind="control", reason="unreachable"}`]:
        '0+1x20',
      [`awp_edge_upstream_failures_total{${E}, route="fine", kind="control", reason="unreachable"}`]:
        '0+0x20',
    },
    expect: [
      {
        at: '15m',
        alert: 'AwpEdgeUpstreamFailures',
        firing: [
          { namespace: 'edge', route: 'gone', kind: 'control', reason: 'unreachable', severity: 'warning' },
        ],
      },
    ],
  },
  {
    name: 'drops: 10 % dropped_slow fires; replaced and downsampled frames are not drops',
    series: {
      [`awp_edge_frames_total{${E}, route="arm", channel="state", direction="world_to_agent", outcome="forwarded"}`]:
        '0+900x30',
      [`awp_edge_frames_total{${E}, route="arm", channel="state", direction="world_to_agent", outcome="dropped_slow"}`]:
        '0+100x30',
      [`awp_edge_frames_total{${E}, route="arm", channel="camera", direction="world_to_agent", outcome="forwarded"}`]:
        '0+100x30',
      [`awp_edge_frames_total{${E}, route="arm", channel="camera", direction="world_to_agent", outcome="replaced"}`]:
        '0+900x30',
      [`awp_edge_frames_total{${E}, route="arm", channel="proprio", direction="world_to_agent", outcome="downsampled"}`]:
        '0+900x30',
    },
    expect: [
      {
        at: '20m',
        alert: 'AwpEdgeFramesDropped',
        firing: [{ namespace: 'edge', route: 'arm', channel: 'state', severity: 'warning' }],
      },
    ],
  },
  {
    name: 'p99 forward latency above 50 ms fires',
    series: {
      [`awp_edge_forward_latency_seconds_bucket{${E}, route="arm", channel="state", binding="inline", le="0.01"}`]:
        '0+0x30',
      [`awp_edge_forward_latency_seconds_bucket{${E}, route="arm", channel="state", binding="inline", le="0.1"}`]:
        '0+100x30',
      [`awp_edge_forward_latency_seconds_bucket{${E}, route="arm", channel="state", binding="inline", le="+Inf"}`]:
        '0+100x30',
      [`awp_edge_forward_latency_seconds_bucket{${E}, route="grid", channel="v", binding="inline", le="0.01"}`]:
        '0+100x30',
      [`awp_edge_forward_latency_seconds_bucket{${E}, route="grid", channel="v", binding="inline", le="+Inf"}`]:
        '0+100x30',
    },
    expect: [
      {
        at: '20m',
        alert: 'AwpEdgeForwardLatencyHigh',
        firing: [{ namespace: 'edge', route: 'arm', severity: 'warning' }],
      },
    ],
  },
  {
    name: 'event-loop lag (the standard nodejs_* name)',
    series: { [`nodejs_eventloop_lag_p99_seconds{${E}}`]: '0.2x20' },
    expect: [{ at: '15m', alert: 'AwpEdgeEventLoopLag', firing: [{ ...POD, severity: 'warning' }] }],
  },
];

/** The rule groups of the PrometheusRule the multi-monitored overlay renders. */
export function renderedRuleGroups(): Group[] {
  const rule = renderOverlay('multi-monitored').find((o) => o.kind === 'PrometheusRule');
  if (rule === undefined) throw new Error('multi-monitored renders no PrometheusRule');
  return (rule as unknown as { spec: { groups: Group[] } }).spec.groups;
}

function promtool(args: string[], cwd: string): { ok: boolean; out: string } {
  try {
    return { ok: true, out: execFileSync(PROMTOOL, args, { cwd, encoding: 'utf8', timeout: 60_000 }) };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    return { ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

const available = existsSync(PROMTOOL) && kubectlAvailable();

describe.skipIf(!available)('deploy/kustomize/components/prometheus-rules (promtool)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'awp-edge-rules-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const groups = renderedRuleGroups();
  const alerts = groups.flatMap((g) => g.rules.map((r) => r.alert)).filter((a) => a !== undefined);

  it('has the alerts operators need, each with a severity, a summary and a description', () => {
    for (const a of [
      'AwpEdgeDown',
      'AwpEdgeNotReady',
      'AwpEdgeUpstreamFailures',
      'AwpEdgeStoreUnavailable',
      'AwpEdgeFramesDropped',
      'AwpEdgeForwardLatencyHigh',
      'AwpEdgeCredentialReloadFailed',
    ])
      expect(alerts).toContain(a);
    for (const r of groups.flatMap((g) => g.rules)) {
      expect(['critical', 'warning', 'info'], r.alert).toContain(r.labels?.severity);
      expect(r.annotations?.summary, r.alert).toBeTruthy();
      expect(r.annotations?.description, r.alert).toBeTruthy();
    }
  });

  it('passes promtool check rules', () => {
    writeFileSync(join(dir, 'rules.yaml'), stringify({ groups }));
    const r = promtool(['check', 'rules', 'rules.yaml'], dir);
    expect(r.out).toContain(`SUCCESS: ${groups.flatMap((g) => g.rules).length} rules found`);
    expect(r.ok, r.out).toBe(true);
  });

  it('every alert is unit-tested, and passes promtool test rules', () => {
    expect(new Set(CASES.flatMap((c) => c.expect.map((e) => e.alert)))).toEqual(new Set(alerts));
    // The expressions, durations and labels are under test; annotation texts were checked above.
    const bare = groups.map((g) => ({ ...g, rules: g.rules.map(({ annotations: _a, ...r }) => r) }));
    writeFileSync(join(dir, 'bare-rules.yaml'), stringify({ groups: bare }));
    const tests = {
      rule_files: ['bare-rules.yaml'],
      evaluation_interval: '1m',
      tests: CASES.map((c) => ({
        name: c.name,
        interval: '1m',
        input_series: Object.entries(c.series).map(([series, values]) => ({ series, values })),
        alert_rule_test: c.expect.map((e) => ({
          eval_time: e.at,
          alertname: e.alert,
          exp_alerts: e.firing.map((labels) => ({ exp_labels: labels })),
        })),
      })),
    };
    writeFileSync(join(dir, 'tests.yaml'), stringify(tests));
    const r = promtool(['test', 'rules', 'tests.yaml'], dir);
    expect(r.ok, r.out).toBe(true);
    expect(r.out).toContain('SUCCESS');
  });
});
