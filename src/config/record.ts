/** `routes[].record` loaded (the shape is the schema's, record-schema.ts): what the schema cannot check. */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import type { RecordFile } from './record-schema.js';
import { join, type Problems } from './problems.js';

/** How a route records its sessions (issue 14; see the README's Flight recorder). */
export interface RecordConfig {
  /** Absolute: resolved against the working directory at load. */
  readonly dir: string;
  readonly class: 'audit' | 'payloads';
  readonly relay: boolean;
  readonly observer: boolean;
  readonly channels?: readonly string[] | undefined;
  readonly max_payload_bytes?: number | undefined;
  readonly rotate_bytes: number;
  readonly rotate_ms: number;
  readonly retain_files: number;
  readonly retain_bytes: number;
  readonly queue_bytes: number;
  readonly redact_paths: readonly string[];
}

/** The loaded form, or undefined with the problems reported. */
export function recordConfig(p: Problems, o: RecordFile, prefix: string): RecordConfig | undefined {
  const before = p.list.length;
  if (o.class !== 'payloads') {
    for (const k of ['channels', 'max_payload_bytes'] as const)
      if (o[k] !== undefined)
        p.fail(
          join(prefix, k),
          'only with class: payloads (an audit record keeps no payloads, only their hashes)',
        );
  }
  const dir = resolve(o.dir);
  let isDir: boolean | undefined;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    isDir = undefined; // absent: created at start
  }
  if (isDir === false) p.fail(join(prefix, 'dir'), `${dir} exists and is not a directory`);
  if (p.list.length > before) return undefined;
  return {
    dir,
    class: o.class,
    relay: o.sessions.includes('relay'),
    observer: o.sessions.includes('observer'),
    channels: o.channels,
    max_payload_bytes: o.max_payload_bytes,
    rotate_bytes: o.rotate_bytes,
    rotate_ms: o.rotate_ms,
    retain_files: o.retain_files,
    retain_bytes: o.retain_bytes,
    queue_bytes: o.queue_bytes,
    redact_paths: o.redact_paths,
  };
}
