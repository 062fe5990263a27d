/**
 * `routes[].record` (the flight recorder, issue 14): defaults, the loaded form, and the one-line
 * messages for what is wrong, from the schema and from the semantic checks.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, validateConfig } from '../../src/config/load.js';

const dir = mkdtempSync(join(tmpdir(), 'awp-record-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const config = (record: unknown) => ({
  agents: { tokens: ['t'] },
  routes: [{ name: 'arm', path: '/', upstream: 'ws://w/', record }],
});

function problems(record: unknown): string[] {
  try {
    validateConfig(config(record), 'f', {});
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.map((p) => p.replace(/^f: /, ''));
    throw err;
  }
  return [];
}

describe('routes[].record', () => {
  it('is off when absent; with a dir, audit class and the defaults', () => {
    expect(validateConfig(config(undefined), 'f', {}).routes[0]!.record).toBeUndefined();
    expect(validateConfig(config({ dir: 'recordings' }), 'f', {}).routes[0]!.record).toEqual({
      dir: resolve('recordings'),
      class: 'audit',
      relay: true,
      observer: true,
      channels: undefined,
      max_payload_bytes: undefined,
      rotate_bytes: 64 * 1024 * 1024,
      rotate_ms: 3_600_000,
      retain_files: 10_000,
      retain_bytes: 10 * 1024 * 1024 * 1024,
      queue_bytes: 64 * 1024 * 1024,
      redact_paths: [],
    });
    const payloads = validateConfig(
      config({ dir, class: 'payloads', channels: ['camera'], max_payload_bytes: 1000, sessions: ['relay'] }),
      'f',
      {},
    ).routes[0]!.record;
    expect(payloads).toMatchObject({
      class: 'payloads',
      channels: ['camera'],
      max_payload_bytes: 1000,
      relay: true,
      observer: false,
    });
  });

  it('says what is wrong, one line per key', () => {
    expect(problems({})).toEqual(['routes[0].record.dir: required: the directory the recording files go to']);
    expect(problems({ dir, clas: 'audit' })).toEqual([
      'routes[0].record.clas: unknown key (expected one of: dir, class, sessions, channels, max_payload_bytes, rotate_bytes, rotate_ms, retain_files, retain_bytes, queue_bytes, redact_paths)',
    ]);
    expect(problems({ dir, class: 'full' })).toEqual([
      'routes[0].record.class: expected one of audit, payloads, got string "full"',
    ]);
    expect(problems({ dir, rotate_bytes: 10, queue_bytes: 2 ** 40 })).toEqual([
      'routes[0].record.rotate_bytes: expected an integer from 4096 to 1099511627776, got number 10',
      'routes[0].record.queue_bytes: expected an integer from 65536 to 4294967296, got number 1099511627776',
    ]);
    expect(problems({ dir, sessions: ['relay', 'agents'] })).toEqual([
      'routes[0].record.sessions[1]: expected relay or observer, got string "agents"',
    ]);
    expect(problems({ dir, sessions: [] })).toEqual([
      'routes[0].record.sessions: expected a list of relay, observer (at least one, each once), got an empty list',
    ]);
    expect(problems({ dir, redact_paths: ['task/content'] })).toEqual([
      'routes[0].record.redact_paths[0]: expected a JSON pointer starting with /, got string "task/content"',
    ]);
  });

  it('keeps payload keys to the payloads class, and a dir that is a file out', () => {
    expect(problems({ dir, channels: ['camera'], max_payload_bytes: 5 })).toEqual([
      'routes[0].record.channels: only with class: payloads (an audit record keeps no payloads, only their hashes)',
      'routes[0].record.max_payload_bytes: only with class: payloads (an audit record keeps no payloads, only their hashes)',
    ]);
    const file = join(dir, 'a-file');
    writeFileSync(file, 'x');
    expect(problems({ dir: file })).toEqual([`routes[0].record.dir: ${file} exists and is not a directory`]);
  });
});
