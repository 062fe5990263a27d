/** Configuration problems, each `<source>: <key>: <what is wrong>`, collected so one run reports all of them. */

export type Env = Readonly<Record<string, string | undefined>>;

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

export class Problems {
  readonly list: string[] = [];
  /** What must exist at run time but is absent now (only when checking without the secrets). */
  readonly runtime: string[] = [];
  /** The files credentials were read from (`*_file` keys), as named: re-read when credentials reload. */
  readonly secretFiles: string[] = [];
  /**
   * @param deferAbsent `check-config` without `--strict`: an environment variable that is not set or a file
   *   that cannot be read is noted in `runtime` instead of refused, so a config checks without the secrets.
   */
  constructor(
    readonly source: string,
    readonly deferAbsent = false,
  ) {}

  fail(key: string, message: string): void {
    this.list.push(`${this.source}: ${key}: ${message}`);
  }

  /** An absent variable or file: a problem, or in deferred mode a run-time requirement (then true). */
  absent(key: string, message: string): boolean {
    if (!this.deferAbsent) this.fail(key, message);
    else this.runtime.push(`${key}: ${message} (needed at run time)`);
    return this.deferAbsent;
  }
}

/** `routes[0]` + `agents` -> `routes[0].agents`. */
export function join(prefix: string, key: string): string {
  return prefix === '' ? key : `${prefix}.${key}`;
}

/** The `got ...` part of a message. */
export function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return v.length === 0 ? 'an empty list' : 'a list';
  if (typeof v === 'object') return 'a mapping';
  // A URL's user information is a credential (a URL that fails its shape may still carry one).
  const shown =
    typeof v === 'string' ? v.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, '$1<credential>@') : v;
  return `${typeof v} ${JSON.stringify(shown)}`;
}

/** The `got ...` part for a credential: its type, never its value. */
export function describeSecret(v: unknown): string {
  if (typeof v === 'string') return v === '' ? 'an empty string' : 'a string';
  if (typeof v === 'number' || typeof v === 'boolean') return `a ${typeof v}`;
  return describe(v);
}
