import type { RelayRoute } from '../relay/relay-effects.js';
import type { StreamEndpoint } from '../session/stream-endpoint.js';
import type { TokenMint } from '../session/tokens.js';
import type { RouteConfig } from '../config/schema.js';
import type { AgentBudget } from '../policy/budgets.js';
import { edgeError } from '../protocol/errors.js';
import { ChannelHub, type HubContext } from '../fanout/channel-hub.js';
import type { ObserverShell } from '../fanout/observer-shell.js';

const MANIFEST_CACHE_LIMIT = 64;

/** The suffix of a route's stream endpoint path: `<route>/stream` (and `/stream/<n>` for a world's n-th). */
export const STREAM_SUFFIX = '/stream';

/** One world behind the edge: its config and what the edge learned about it. */
export class RouteRuntime {
  /** `initialize` results by the agent's params (JSON), newest last. */
  private readonly manifests = new Map<string, string>();
  /** Observer hubs by time model. */
  private readonly hubs = new Map<'streaming' | 'lockstep', ChannelHub>();

  constructor(
    private current: RouteConfig,
    private readonly mint: TokenMint,
    /** Why new sessions cannot be stored now, or undefined (see the session store's health). */
    private readonly storeRefusal: () => string | undefined = () => undefined,
    /** What relay connections of the route may hold of an agent's bytes (the edge's transport config). */
    private readonly limits: { readonly maxJsonDepth?: number; readonly maxQueuedBytes?: number } = {},
  ) {}

  /** The route's configuration, with the credentials in force now (see `rotate`). */
  get config(): RouteConfig {
    return this.current;
  }

  get name(): string {
    return this.current.name;
  }

  /**
   * Takes the agent, approver and upstream credentials of `next` (the same route, validated again with its
   * credential files read anew) for whatever connects or dials from now on: connections and sessions that
   * are open keep the credential they authenticated or dialled with. Whether anything changed.
   */
  rotate(next: RouteConfig): boolean {
    const c = this.current;
    const same =
      sameList(c.agent_tokens, next.agent_tokens) &&
      sameList(c.approver_tokens, next.approver_tokens) &&
      c.upstream_token === next.upstream_token;
    if (same) return false;
    this.current = {
      ...c,
      agent_tokens: next.agent_tokens,
      approver_tokens: next.approver_tokens,
      upstream_token: next.upstream_token,
    };
    return true;
  }

  get streamPath(): string {
    return joinPath(this.config.path, STREAM_SUFFIX);
  }

  /** The relay's view of this route for one agent connection (its public base URL for endpoints). */
  forConnection(publicBase: string, budget?: AgentBudget, approver = false): RelayRoute {
    return {
      name: this.config.name,
      manifestFor: (key) => this.manifests.get(key),
      rememberManifest: (key, json) => {
        this.manifests.delete(key);
        this.manifests.set(key, json);
        if (this.manifests.size > MANIFEST_CACHE_LIMIT) {
          this.manifests.delete(this.manifests.keys().next().value!);
        }
      },
      forgetManifests: () => this.manifests.clear(),
      edgeEndpoints: (world) => this.edgeEndpoints(publicBase, world),
      mintToken: () => this.mint.mint(),
      ownsToken: (token) => this.mint.owns(token),
      fanOutObservers: this.config.observers === 'fanout' && !approver,
      ...this.limits,
      approver,
      admitSession: () => {
        const store = this.storeRefusal();
        if (store !== undefined) return edgeError('STORE_UNAVAILABLE', store);
        if (budget !== undefined && !budget.canOpenSession()) {
          return edgeError('BUDGET_EXCEEDED', 'this credential holds as many sessions as its budget allows');
        }
        return undefined;
      },
      admitStream: () => budget === undefined || budget.message(0) === null,
    };
  }

  /** The hub serving this route's observers in a time model, started on first use. */
  hub(mode: 'streaming' | 'lockstep', context: () => Omit<HubContext, 'retired'>): ChannelHub {
    let hub = this.hubs.get(mode);
    if (hub === undefined) {
      // Assigned, not spread: the context reads the upstream credential when the hub dials (it may rotate).
      hub = new ChannelHub(
        mode,
        Object.assign(context(), {
          retired: (h: ChannelHub) => {
            if (this.hubs.get(mode) === h) this.hubs.delete(mode);
          },
        }),
      );
      this.hubs.set(mode, hub);
    }
    return hub;
  }

  /** The observer session a token names, with its hub. */
  observer(token: string): { hub: ChannelHub; session: ObserverShell } | undefined {
    for (const hub of this.hubs.values()) {
      const session = hub.observer(token);
      if (session !== undefined) return { hub, session };
    }
    return undefined;
  }

  allHubs(): IterableIterator<ChannelHub> {
    return this.hubs.values();
  }

  /**
   * The edge's stream endpoints for an observer: the edge relays no world endpoint, it serves them, on
   * the stream listener when there is one (at `stream_public_url`, or the host agents reached the edge by
   * and its port).
   */
  observerEndpoints(publicBase: string): StreamEndpoint[] {
    return [
      ...this.webtransportEndpoints(publicBase, [{ binding: 'ws' }]),
      { binding: 'ws', url: `${this.streamListener?.(publicBase) ?? publicBase}${this.streamPath}` },
      { binding: 'inline' },
    ];
  }

  /** The base URL of the observers' stream listener (`stream_listen`) for a public base, once it listens. */
  private streamListener: ((publicBase: string) => string) | undefined;

  enableStreamListener(port: number, publicUrl: string | undefined): void {
    this.streamListener = (publicBase) => {
      if (publicUrl !== undefined) return publicUrl;
      const url = new URL(publicBase);
      return `${url.protocol}//${url.hostname}:${port}`;
    };
  }

  // ---- webtransport (src/edge/webtransport-endpoint.ts) ----
  /** The port of the edge's WebTransport listener, once it listens; undefined when none is configured. */
  private webtransportPort: number | undefined;

  enableWebTransport(port: number): void {
    this.webtransportPort = port;
  }

  /**
   * A `webtransport` endpoint for each of the world's `ws` endpoints (same index, same paths), at the
   * host agents reached the edge by and the listener's port; offered before `ws` (independent flow
   * control per channel, AWP-ROB-006).
   */
  private webtransportEndpoints(publicBase: string, world: readonly StreamEndpoint[]): StreamEndpoint[] {
    if (this.webtransportPort === undefined) return [];
    const base = `https://${new URL(publicBase).hostname}:${this.webtransportPort}`;
    const out: StreamEndpoint[] = [];
    world.forEach((ep, i) => {
      if (ep.binding !== 'ws') return;
      const path = i === 0 ? this.streamPath : `${this.streamPath}/${i}`;
      out.push({ ...ep, binding: 'webtransport', url: `${base}${path}` });
    });
    return out;
  }
  // ---- end webtransport ----

  /**
   * The edge's own `stream_endpoints`: each of the world's `ws` endpoints, relayed at the edge, in the
   * world's order; `inline` always present and last (AWP-TRN-004). Bindings the edge cannot relay
   * upstream are not offered.
   */
  edgeEndpoints(publicBase: string, world: readonly StreamEndpoint[]): StreamEndpoint[] {
    const out: StreamEndpoint[] = this.webtransportEndpoints(publicBase, world);
    world.forEach((ep, i) => {
      if (ep.binding !== 'ws') return;
      const path = i === 0 ? this.streamPath : `${this.streamPath}/${i}`;
      out.push({ ...ep, url: `${publicBase}${path}` });
    });
    const inline = world.find((ep) => ep.binding === 'inline');
    out.push(inline ?? { binding: 'inline' });
    return out;
  }

  /** The world endpoint an edge stream path names, if any. */
  worldEndpointIndex(path: string): number | undefined {
    if (path === this.streamPath) return 0;
    const prefix = `${this.streamPath}/`;
    if (!path.startsWith(prefix)) return undefined;
    const n = Number(path.slice(prefix.length));
    return Number.isInteger(n) && n > 0 ? n : undefined;
  }
}

export function joinPath(base: string, suffix: string): string {
  return base.endsWith('/') ? base.slice(0, -1) + suffix : base + suffix;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
