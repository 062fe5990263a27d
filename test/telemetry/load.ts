/**
 * Load through the edge from the demo worlds that exercises every dashboard panel: a relay agent
 * acting on the arm (pings, submissions, a rate-limited burst that the edge refuses with 4002, a
 * submission the world refuses), a lockstep agent ticking the grid, observers served by the hub
 * (inline and on the ws stream endpoint, one downsampled, some that stop reading), resumes after
 * drops, resumes with an unknown token, and agents on a route whose world is down.
 */
import WebSocket from 'ws';
import { AwpClient, initializeParams, type Json } from '../support/awp-client.js';
import { AGENT_TOKEN, type TestEdge } from '../support/edge.js';

const MOVE_A = { pose: { frame: 'base', p_m: [0.1, 0.1, 0.3], q: [0, 0, 0, 1] }, max_velocity_mps: 0.2 };
const MOVE_B = { pose: { frame: 'base', p_m: [-0.1, 0.1, 0.3], q: [0, 0, 0, 1] }, max_velocity_mps: 0.2 };
/** Above the arm's max_velocity_mps 0.5: the world refuses it (an error round trip). */
const TOO_FAST = { pose: { frame: 'base', p_m: [0.1, -0.1, 0.3], q: [0, 0, 0, 1] }, max_velocity_mps: 5 };

export interface LoadCounts {
  accepted: number;
  refusedByEdge: number;
  refusedByWorld: number;
  ticks: number;
  relayResumes: number;
  observerResumes: number;
  unknownTokenResumes: number;
  upstreamFailures: number;
}

/** The clients of one load run; `round()` adds one burst of events, `close()` ends everything. */
export class EdgeLoad {
  readonly counts: LoadCounts = {
    accepted: 0,
    refusedByEdge: 0,
    refusedByWorld: 0,
    ticks: 0,
    relayResumes: 0,
    observerResumes: 0,
    unknownTokenResumes: 0,
    upstreamFailures: 0,
  };
  private readonly clients: AwpClient[] = [];
  private readonly paths = new Map<AwpClient, string>();
  private readonly sockets: WebSocket[] = [];
  private actor!: { client: AwpClient; token: string };
  private grid!: AwpClient;
  private gridObserver!: AwpClient;
  private tick = 0;
  private observer!: { client: AwpClient; token: string };
  private pinger: NodeJS.Timeout | undefined;
  private actions = 0;

  private constructor(private readonly edge: TestEdge) {}

  static async start(edge: TestEdge): Promise<EdgeLoad> {
    const load = new EdgeLoad(edge);
    await load.setup();
    return load;
  }

  private async connect(path: string, viaSubprotocol = false): Promise<AwpClient> {
    const c = await AwpClient.connect(this.edge.url(path), { credential: AGENT_TOKEN, viaSubprotocol });
    this.clients.push(c);
    this.paths.set(c, path);
    return c;
  }

  /**
   * Inline frames (`obs.frame`) received so far on the grid route (every client there subscribes to
   * grid_view only and reads everything): by all its clients, and by its one hub observer.
   */
  gridFramesReceived(): { all: number; observer: number } {
    const frames = (c: AwpClient) => c.received.filter((m) => m.method === 'obs.frame').length;
    let all = 0;
    for (const c of this.clients) if (this.paths.get(c) === '/grid') all += frames(c);
    return { all, observer: frames(this.gridObserver) };
  }

  private async setup(): Promise<void> {
    // The acting agent on the arm, frames inline; its pings give the edge clock samples (staleness).
    const actor = await this.connect('/arm');
    await actor.ok('initialize', initializeParams());
    const ready = await actor.ok('session.open', {
      embodiment: 'arm_01',
      mode: 'streaming',
      subscribe: [{ channel: 'proprio' }, { channel: 'state' }],
    });
    this.actor = { client: actor, token: ready.session_token as string };
    this.pinger = setInterval(
      () => void this.actor.client.call('ping', { origin_ns: 1 }).catch(() => undefined),
      200,
    );

    // The lockstep agent on the grid.
    this.grid = await this.connect('/grid', true);
    await this.grid.ok('initialize', initializeParams());
    const gridReady = await this.grid.ok('session.open', {
      embodiment: 'avatar_0',
      mode: 'lockstep',
      subscribe: [{ channel: 'grid_view' }],
    });
    this.tick = typeof gridReady.tick === 'number' ? gridReady.tick : 0;

    // Observers (session.open without an embodiment): served by the route's hub.
    await this.openObserver('/arm', 'streaming', [{ channel: 'proprio' }, { channel: 'state' }]);
    await this.openObserver('/arm', 'streaming', [{ channel: 'proprio', rate_hz: 10 }]); // downsampled
    const onStream = await this.openObserver('/arm', 'streaming', [
      { channel: 'proprio' },
      { channel: 'state' },
    ]);
    await this.openStream(onStream.ready, false);
    const resumable = await this.openObserver('/arm', 'streaming', [{ channel: 'state' }], true);
    this.observer = { client: resumable.client, token: resumable.ready.session_token as string };
    this.gridObserver = (await this.openObserver('/grid', 'lockstep', [{ channel: 'grid_view' }])).client;
    await this.slowStreamObserver();
    await this.slowInlineObserver();
  }

  private async openObserver(
    path: string,
    mode: 'streaming' | 'lockstep',
    subscribe: unknown[],
    viaSubprotocol = false,
  ): Promise<{ client: AwpClient; ready: Json }> {
    const client = await this.connect(path, viaSubprotocol);
    await client.ok('initialize', initializeParams());
    const ready = await client.ok('session.open', { mode, subscribe });
    return { client, ready };
  }

  /** A `ws` stream connection to the first endpoint of a session.ready, authenticated with its token. */
  private async openStream(ready: Json, paused: boolean): Promise<WebSocket> {
    const endpoints = ready.stream_endpoints as { binding: string; url?: string }[];
    const url = endpoints.find((e) => e.binding === 'ws')?.url;
    if (url === undefined) throw new Error(`no ws stream endpoint in ${JSON.stringify(endpoints)}`);
    const ws = new WebSocket(url, ['awp'], {
      headers: { authorization: `Bearer ${ready.session_token as string}` },
    });
    this.sockets.push(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    if (paused) ws.pause();
    return ws;
  }

  /**
   * An observer whose stream connection stops reading: camera frames (latest-wins) are replaced while
   * its socket is full.
   */
  private async slowStreamObserver(): Promise<void> {
    const slow = await this.openObserver('/arm', 'streaming', [{ channel: 'camera' }, { channel: 'state' }]);
    await this.openStream(slow.ready, true);
  }

  /**
   * Each round, a new inline observer that stops reading: a camera frame fills its socket at once, then
   * reliable state frames queue until they overflow its control queue (a few seconds at the arm's
   * state rate) and the edge closes it (dropped_slow).
   */
  private async slowInlineObserver(): Promise<void> {
    const { client } = await this.openObserver('/arm', 'streaming', [
      { channel: 'camera' },
      { channel: 'state' },
    ]);
    client.ws.pause();
  }

  /** One burst of events; rounds are spaced so that Prometheus sees counters move between scrapes. */
  async round(): Promise<void> {
    const acting = async () => {
      await this.act();
      await this.resumeActor();
    };
    await Promise.all([
      acting(),
      this.tickGrid(),
      this.resumeObserver(),
      this.strayResume(),
      this.unreachable(),
      this.slowInlineObserver(),
    ]);
  }

  private async act(): Promise<void> {
    // One admitted submission, then a burst the edge refuses itself (max_action_rate_hz 10, AWP-ENV-004).
    const id = () => `load-${++this.actions}`;
    const answers = await Promise.all(
      [MOVE_A, MOVE_B, MOVE_A, MOVE_B].map((params) =>
        this.actor.client.call('action.submit', { action_id: id(), type: 'move_to_pose', params }),
      ),
    );
    for (const a of answers) {
      if (a.error === undefined) this.counts.accepted++;
      else if ((a.error as Json).code === 4002) this.counts.refusedByEdge++;
    }
    await sleep(120);
    const refused = await this.actor.client.call('action.submit', {
      action_id: id(),
      type: 'move_to_pose',
      params: TOO_FAST,
    });
    if (refused.error !== undefined) this.counts.refusedByWorld++;
  }

  private async tickGrid(): Promise<void> {
    await this.grid.call('action.submit', {
      action_id: `g-${this.tick}`,
      type: 'move',
      params: { direction: this.tick % 2 === 0 ? 'east' : 'west' },
    });
    // Several advances at once: every one is a per-tick frame to each grid subscriber.
    const r = await this.grid.call('world.tick', { expected_tick: this.tick, count: 50 });
    const tick = (r.result as Json | undefined)?.tick;
    if (typeof tick === 'number') {
      this.tick = tick;
      this.counts.ticks++;
    }
    await this.grid.call('world.tick', { expected_tick: this.tick + 7 }); // AWP_TICK_MISMATCH: an error round trip
  }

  /** The acting agent's connection drops; it reconnects and resumes (the edge replays its journal). */
  private async resumeActor(): Promise<void> {
    this.actor.client.drop();
    const again = await this.connect('/arm', true);
    await again.ok('initialize', initializeParams());
    await again.ok('session.resume', { session_token: this.actor.token, last_status_seq: 0 });
    this.actor.client = again;
    this.counts.relayResumes++;
  }

  private async resumeObserver(): Promise<void> {
    this.observer.client.drop();
    const again = await this.connect('/arm');
    await again.ok('initialize', initializeParams());
    await again.ok('session.resume', { session_token: this.observer.token, last_status_seq: 0 });
    this.observer.client = again;
    this.counts.observerResumes++;
  }

  private async strayResume(): Promise<void> {
    const c = await this.connect('/arm');
    await c.ok('initialize', initializeParams());
    const r = await c.call('session.resume', {
      session_token: `not-a-token-${this.actions}`,
      last_status_seq: 0,
    });
    if (r.error !== undefined) this.counts.unknownTokenResumes++;
    c.close();
  }

  private async unreachable(): Promise<void> {
    const c = await this.connect('/gone');
    const r = await c.call('initialize', initializeParams());
    if (r.error !== undefined) this.counts.upstreamFailures++;
    await c.waitClosed().catch(() => undefined);
  }

  async close(): Promise<void> {
    clearInterval(this.pinger);
    for (const s of this.sockets) s.terminate();
    for (const c of this.clients) c.drop();
    await sleep(50);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
