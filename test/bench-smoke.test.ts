/**
 * The benchmark machinery runs: one very short fan-out case (world, edge on `ws`, one generator
 * process) produces a summary of the expected shape with frames actually delivered. Timings are
 * printed by the benchmarks, never asserted here.
 */
import { describe, expect, it } from 'vitest';
import { runCase } from '../bench/lib/fanout-case.js';
import { resolveRuntime } from '../bench/lib/runtime.js';

describe('bench runner', () => {
  it('runs a fan-out case and reports delivery, latency and process figures', async () => {
    const result = await runCase(
      { runtime: resolveRuntime(), full: false, durationS: 1, log: () => undefined },
      {
        target: 'edge-ws',
        observers: 2,
        warmupS: 0.5,
        durationS: 1,
        perGenerator: 500,
        workload: {
          proprioHz: 100,
          cameraHz: 10,
          cameraWidth: 64,
          cameraHeight: 16,
          channels: ['proprio', 'camera'],
        },
      },
    );
    expect(result.opened).toBe(2);
    expect(result.open_failures).toBe(0);
    expect(result.offered_fps).toBe(2 * 110);
    expect(Object.keys(result.healthy.channels).sort()).toEqual(['camera', 'proprio']);
    expect(result.healthy.channels.camera!.frame_bytes).toBe(28 + 12 + 64 * 16);
    expect(result.healthy.latency.count).toBeGreaterThan(0);
    for (const k of ['p50_us', 'p99_us', 'max_us'] as const)
      expect(typeof result.healthy.latency[k]).toBe('number');
    expect(result.server.pid).toBeGreaterThan(0);
    expect(typeof result.server.cpu_pct).toBe('number');
    expect(result.server.rss_mib_max).toBeGreaterThan(0);
    expect(result.world?.rss_mib_max).toBeGreaterThan(0);
    expect(result.generators).toHaveLength(1);
    expect(typeof result.generators[0]!.saturated).toBe('boolean');
  }, 20_000);
});
