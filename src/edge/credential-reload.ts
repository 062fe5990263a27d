/**
 * Credentials rotate while the edge runs. On SIGHUP, and when a credential file changes (unless
 * `credential_files.watch: false`), the configuration is validated again exactly as at start, with every
 * `*_file` it names read anew. A valid result replaces each route's agent, approver and upstream credentials
 * for whatever connects or dials next; connections and sessions that are open keep running on the credential
 * they authenticated with, and budgets (kept per credential) keep their counts. An invalid result changes
 * nothing: one log line names the file and what is wrong, and `awp_edge_config_reloads_total{result="failure"}`
 * counts it. Environment variables and literal values are read once: a process's environment cannot change.
 */
import { watch, realpathSync, type FSWatcher } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError } from '../config/problems.js';
import type { CredentialFilesConfig, EdgeConfig } from '../config/schema.js';
import type { CredentialBudgets } from '../policy/budgets.js';
import { credentialDigest, credentialMatches } from '../transport/auth.js';
import type { Logger } from '../telemetry/logger.js';
import type { EdgeMetrics } from '../telemetry/metrics.js';
import type { RouteRuntime } from './route.js';

export type ReloadTrigger = 'signal' | 'watch';

export type ReloadOutcome =
  | { readonly ok: true; readonly changed: readonly string[]; readonly retiredConnections: number }
  | { readonly ok: false; readonly problems: readonly string[] };

/** Retired credentials still refused in URLs (AWP-SEC-006), newest kept. */
const RETIRED_KEPT = 256;

/**
 * The credentials this edge knows, to refuse a URL that carries one (AWP-SEC-006): those in force, and
 * those a reload retired (a retired credential may still be valid elsewhere, e.g. at the world).
 */
export class KnownCredentials {
  private current: string[] = [];
  private retired: string[] = [];
  /** Both lists, as one (credentialMatches keeps its digests). */
  private all: readonly string[] = [];

  constructor(routes: readonly RouteRuntime[]) {
    this.update(routes);
  }

  update(routes: readonly RouteRuntime[]): void {
    const next = routes.flatMap((r) => credentialsOf(r));
    const inForce = new Set(next);
    const retired = new Set(this.retired.filter((c) => !inForce.has(c))); // back in force
    for (const old of this.current) if (!inForce.has(old)) retired.add(old);
    this.retired = [...retired].slice(-RETIRED_KEPT);
    this.current = next;
    this.all = [...next, ...this.retired];
  }

  /** Credentials a reload took out of force (newest last, at most RETIRED_KEPT). */
  get retiredList(): readonly string[] {
    return this.retired;
  }

  has(value: string): boolean {
    return credentialMatches(value, this.all);
  }
}

function credentialsOf(r: RouteRuntime): string[] {
  const c = r.config;
  return [
    ...c.agent_tokens,
    ...c.approver_tokens,
    ...(c.upstream_token !== undefined ? [c.upstream_token] : []),
  ];
}

export interface ReloadHost {
  readonly routes: readonly RouteRuntime[];
  readonly known: KnownCredentials;
  readonly budgets: CredentialBudgets;
  readonly log: Logger;
  readonly metrics: EdgeMetrics;
}

export class CredentialReload {
  private lastOk = true;
  /** The problems last reported, so a watcher seeing the same broken file again does not repeat them. */
  private lastProblems = '';
  /** Start-only secrets last reported as changed (a watcher reports them once). */
  private lastRestart = '';
  private applied: EdgeConfig;
  private readonly watchers = new Map<string, FSWatcher>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly host: ReloadHost,
    start: EdgeConfig,
    private readonly reread: () => EdgeConfig,
    /** Watch the files' directories (when `credential_files.watch` allows): only with a real `reread`. */
    private readonly watching: boolean,
  ) {
    this.applied = start;
    if (this.watches) this.rearm();
  }

  private get watches(): boolean {
    return this.watching && this.options.watch && this.files().length > 0;
  }

  private get options(): Required<CredentialFilesConfig> {
    return { watch: true, debounce_ms: 1000, ...this.applied.credential_files };
  }

  private files(): readonly string[] {
    return this.applied.secret_files ?? [];
  }

  /** Re-reads and applies the credentials; a failure leaves everything as it was. */
  reload(trigger: ReloadTrigger): ReloadOutcome {
    const { log, metrics } = this.host;
    let next: EdgeConfig;
    try {
      next = this.reread();
    } catch (err) {
      const problems = err instanceof ConfigError ? err.problems : [String(err)];
      const text = problems.join('; ');
      // A watcher reports a problem once; SIGHUP (an operator asking) always answers.
      if (trigger === 'watch' && !this.lastOk && text === this.lastProblems) return { ok: false, problems };
      this.lastOk = false;
      this.lastProblems = text;
      metrics.configReloads.labels('failure').inc();
      metrics.recordReload(false);
      log.error(
        { event: 'credentials_reload_failed', trigger, problems },
        `credentials not reloaded: ${text}; the edge keeps the credentials it had`,
      );
      return { ok: false, problems };
    } finally {
      if (this.watches) this.rearm();
    }
    const before = this.host.routes.map((r) => credentialsOf(r));
    const changed: string[] = [];
    for (const route of this.host.routes) {
      const same = next.routes.find((r) => r.name === route.name);
      if (same !== undefined && route.rotate(same)) changed.push(route.name);
    }
    const restartOnly = restartOnlyChanges(this.applied, next);
    const quiet = changed.length === 0 && this.lastOk && restartOnly.join() === this.lastRestart;
    if (trigger === 'watch' && quiet) return { ok: true, changed, retiredConnections: 0 };
    this.host.known.update(this.host.routes);
    const now = new Set(this.host.routes.flatMap((r) => credentialsOf(r)));
    const retired = [...new Set(before.flat())].filter((c) => !now.has(c));
    // Connections still open on a credential this or an earlier reload retired.
    const retiredConnections = this.host.known.retiredList.reduce(
      (n, c) => n + this.host.budgets.connectionsOf(credentialDigest(c)),
      0,
    );
    this.applied = { ...this.applied, secret_files: next.secret_files };
    this.lastOk = true;
    this.lastProblems = '';
    this.lastRestart = restartOnly.join();
    metrics.configReloads.labels('success').inc();
    metrics.recordReload(true);
    log.info(
      {
        event: 'credentials_reloaded',
        trigger,
        routes_changed: changed,
        credentials_retired: retired.length,
        retired_connections: retiredConnections,
        ...(restartOnly.length > 0 && { restart_needed: restartOnly }),
      },
      summary(changed, this.files().length, retiredConnections, restartOnly),
    );
    return { ok: true, changed, retiredConnections };
  }

  /** Stops watching. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
  }

  /**
   * Watches the directory of each credential file as named and of the file it resolves to now: Kubernetes
   * swaps a Secret volume's `..data` symlink (a rename in the named directory) and removes the old target
   * directory, so the set is worked out again after every reload.
   */
  private rearm(): void {
    if (this.closed) return;
    const dirs = new Set<string>();
    for (const f of this.files()) {
      dirs.add(dirname(resolve(f)));
      try {
        dirs.add(dirname(realpathSync(f)));
      } catch {
        // Absent now (a reload reports it); the named directory is watched for its return.
      }
    }
    for (const [dir, w] of this.watchers) {
      if (dirs.has(dir)) continue;
      w.close();
      this.watchers.delete(dir);
    }
    for (const dir of dirs) {
      if (this.watchers.has(dir)) continue;
      try {
        const w = watch(dir, { persistent: false }, () => this.changed());
        w.on('error', () => {
          w.close();
          if (this.watchers.get(dir) === w) this.watchers.delete(dir);
        });
        this.watchers.set(dir, w);
      } catch (err) {
        this.host.log.warn(
          { event: 'credentials_watch_failed', dir, err: (err as Error).message },
          `cannot watch ${dir} for credential changes: send SIGHUP after changing a credential file there`,
        );
      }
    }
  }

  /** A change in a watched directory: re-read once it has been quiet for `debounce_ms`. */
  private changed(): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (!this.closed) this.reload('watch');
    }, this.options.debounce_ms);
    this.timer.unref();
  }
}

/** Secrets the edge reads only at start, changed in the files now. */
function restartOnlyChanges(was: EdgeConfig, now: EdgeConfig): string[] {
  const out: string[] = [];
  const url = (c: EdgeConfig) => (c.store.kind === 'redis' ? c.store.url : undefined);
  if (url(was) !== url(now)) out.push('store.url');
  for (const k of ['tls', 'webtransport'] as const) {
    if (was[k]?.cert !== now[k]?.cert || was[k]?.key !== now[k]?.key) out.push(`${k} certificate or key`);
  }
  return out;
}

function summary(changed: readonly string[], files: number, retiredOpen: number, restart: string[]): string {
  const what =
    changed.length > 0
      ? `new connections use the new credentials of route${changed.length === 1 ? '' : 's'} ${changed.join(', ')}`
      : files > 0
        ? 'nothing changed'
        : 'nothing changed (no credential files: environment variables and literal values are read once, at start)';
  const open =
    retiredOpen > 0
      ? `; ${retiredOpen} open connection${retiredOpen === 1 ? '' : 's'} keep${retiredOpen === 1 ? 's' : ''} running on retired credentials`
      : '';
  const later = restart.length > 0 ? `; ${restart.join(', ')} changed: used only after a restart` : '';
  return `credentials reloaded: ${what}${open}${later}`;
}
