/**
 * Credentials in the config: given literally, by environment variable (`*_env`) or by file (`*_file`), one
 * way only. Messages name the key and the variable or file, never a credential.
 */
import { readFileSync } from 'node:fs';
import { join, type Env, type Problems } from './problems.js';

export const AGENT_TOKENS_ENV = 'AWP_EDGE_AGENT_TOKENS';
/** Approver credentials of `serve --upstream` (a config file names its own per route). */
export const APPROVER_TOKENS_ENV = 'AWP_EDGE_APPROVER_TOKENS';

/**
 * Reads `<name>`, `<name>_env` or `<name>_file` of a section whose shape is valid. When the variable or file
 * is absent and the check defers it (check-config without --strict), `placeholder` stands in for it.
 */
export function resolveSecret(
  p: Problems,
  o: Readonly<Record<string, unknown>>,
  prefix: string,
  name: string,
  env: Env,
  placeholder = 'placeholder',
): string | string[] | undefined {
  const given = [name, `${name}_env`, `${name}_file`].filter((k) => o[k] !== undefined);
  if (given.length > 1) {
    p.fail(join(prefix, given.join('/')), 'give a credential one way only');
    return undefined;
  }
  const literal = o[name] as string | string[] | undefined;
  if (literal !== undefined) return literal;
  const envName = o[`${name}_env`] as string | undefined;
  if (envName !== undefined) {
    const value = env[envName];
    if (value === undefined || value === '')
      return p.absent(join(prefix, `${name}_env`), `environment variable ${envName} is not set`)
        ? placeholder
        : undefined;
    return value;
  }
  const file = o[`${name}_file`] as string | undefined;
  if (file === undefined) return undefined;
  if (!p.secretFiles.includes(file)) p.secretFiles.push(file);
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch (err) {
    return p.absent(join(prefix, `${name}_file`), `cannot read ${file}: ${(err as Error).message}`)
      ? placeholder
      : undefined;
  }
  // An empty file is a mistake (or a write caught half-way), never "no credential".
  if (text.replace(/[\s,]/g, '') === '') {
    p.fail(join(prefix, `${name}_file`), `${file} holds no credential (it is empty)`);
    return undefined;
  }
  return text;
}

export interface AgentCredentials {
  readonly tokens: readonly string[];
  readonly allow_anonymous: boolean;
}

/** The outcome for one credential section: `failed` when it had a problem (already reported). */
export type Section<T> = { readonly value: T | undefined; readonly failed: boolean };

/** RFC 6455 token characters: an agent credential must travel as the subprotocol `awp.bearer.<token>`. */
const TOKEN_CHARS = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * An `agents` section; `isDefault` (the top-level one) also reads AWP_EDGE_AGENT_TOKENS. Undefined when the
 * section says nothing, so a route inherits the top-level section.
 */
export function agentCredentials(
  p: Problems,
  o: Readonly<Record<string, unknown>>,
  prefix: string,
  env: Env,
  isDefault: boolean,
): Section<AgentCredentials> {
  const before = p.list.length;
  let tokens = tokenList(resolveSecret(p, o, prefix, 'tokens', env));
  if (tokens === undefined && isDefault && p.list.length === before && env[AGENT_TOKENS_ENV] !== undefined)
    tokens = splitTokens(env[AGENT_TOKENS_ENV]);
  if (tokens?.some((t) => !TOKEN_CHARS.test(t)) === true) {
    p.fail(
      join(prefix, 'tokens'),
      'a token has characters outside RFC 6455 token characters (it could not travel as awp.bearer.<token>)',
    );
  }
  const failed = p.list.length > before;
  const anonymous = o.allow_anonymous as boolean | undefined;
  if (failed || (tokens === undefined && anonymous === undefined)) return { value: undefined, failed };
  return { value: { tokens: tokens ?? [], allow_anonymous: anonymous ?? false }, failed };
}

/** An `approvers` section: the tokens of approver connections. */
export function approverTokens(
  p: Problems,
  o: Readonly<Record<string, unknown>>,
  prefix: string,
  env: Env,
): string[] {
  return tokenList(resolveSecret(p, o, prefix, 'tokens', env)) ?? [];
}

function tokenList(v: string | string[] | undefined): string[] | undefined {
  return typeof v === 'string' ? splitTokens(v) : v;
}

function splitTokens(s: string): string[] {
  return s
    .split(/[,\n]/)
    .map((t) => t.trim())
    .filter((t) => t.length > 0);
}
