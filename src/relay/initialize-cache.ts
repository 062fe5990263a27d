/**
 * The agent's `initialize` on a relay connection (sans-IO). While the connection has no upstream it is
 * answered from the route's cache of the world's manifests, so sessionless connections (observers-to-be,
 * probes) cost the world nothing; the agent's own initialize is sent upstream, unchanged, if and when the
 * connection opens a relay session, and the world's answer is checked against what the agent was told
 * (AWP-MAN-003: a changed manifest means the agent must initialize again).
 */
import type { JsonRpcId, ParsedMessage } from '../protocol/jsonrpc.js';
import type { RelayRoute } from './relay-effects.js';
import type { UpstreamState } from './upstream-link.js';

/**
 * The longest initialize params (as JSON) a manifest is cached under. An agent's are a few hundred
 * bytes; larger ones are relayed and never kept, or an agent sending a route's cache limit of
 * different 32 MiB params would make one route hold gigabytes.
 */
export const MAX_CACHED_PARAMS_CHARS = 4096;

interface Deferred {
  readonly id: JsonRpcId;
  readonly text: string;
  readonly paramsKey: string;
  readonly answered: string;
}

export class InitializeCache {
  /** The agent's initialize params (its manifest: modalities and rates matter to an observer hub). */
  params: Record<string, unknown> | undefined;
  private deferred: Deferred | null = null;

  constructor(private readonly route: RelayRoute) {}

  /**
   * The agent's initialize: the reply and the manifest from the cache when `cacheable`, else the key the
   * world's result is to be cached under (none for params over MAX_CACHED_PARAMS_CHARS).
   */
  fromAgent(
    id: JsonRpcId,
    params: unknown,
    text: string,
    cacheable: boolean,
  ): { reply: string; manifest: unknown } | { key: string | undefined } {
    this.params = (params ?? undefined) as Record<string, unknown> | undefined;
    const key = JSON.stringify(params ?? null);
    if (key.length > MAX_CACHED_PARAMS_CHARS) return { key: undefined };
    const cached = cacheable ? this.route.manifestFor(key) : undefined;
    if (cached === undefined) return { key };
    this.deferred = { id, text, paramsKey: key, answered: cached };
    return { reply: resultReply(id, cached), manifest: JSON.parse(cached) };
  }

  /** A world.manifest answered from the cache, while the connection has no upstream. */
  manifestReply(id: JsonRpcId): string | undefined {
    return this.deferred !== null ? resultReply(id, this.deferred.answered) : undefined;
  }

  /** The agent's own initialize, to send first when the link opens, if it was answered from the cache. */
  get handshake(): string | undefined {
    return this.deferred?.text;
  }

  /**
   * Whether `id` is that of the deferred initialize on its way upstream. It is not a pending request:
   * the agent may reuse the id, answered long ago; in `handshake` nothing else is upstream, so the first
   * response with the id is this one's.
   */
  isDeferred(id: JsonRpcId, link: UpstreamState): boolean {
    return link === 'handshake' && this.deferred?.id === id;
  }

  /** The world answered the deferred initialize: true if the manifest is the one the agent holds. */
  settle(msg: Extract<ParsedMessage, { kind: 'result' | 'error' }>): boolean {
    const deferred = this.deferred!;
    this.deferred = null;
    const now = msg.kind === 'result' ? JSON.stringify(msg.result) : null;
    if (now === deferred.answered) return true;
    if (now !== null) this.route.rememberManifest(deferred.paramsKey, now);
    return false;
  }

  /** The world's result for an initialize relayed upstream: cached for later connections (if it has a key). */
  remember(key: string | undefined, result: unknown): void {
    if (key !== undefined) this.route.rememberManifest(key, JSON.stringify(result));
  }
}

function resultReply(id: JsonRpcId, resultJson: string): string {
  return `{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":${resultJson}}`;
}
