/**
 * A minimal WebSocket relay for testing the harness's `agentUrl` hook: one upstream connection per agent
 * connection, messages forwarded in order, each side closed when the other closes. An optional transform
 * rewrites or drops messages, so tests can prove the harness notices a proxy that changes the conversation.
 * It is a test aid, not a model of the edge proxy.
 */
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import type { JsonObject } from './trace-types.js';
import { AWP_SUBPROTOCOL, decodeMessage, terminateAndWait } from './ws-io.js';

export type RelayDirection = 'agent-to-world' | 'world-to-agent';
/** Returns the message to forward, several messages to forward in order, or null to drop it. */
export type RelayTransform = (
  direction: RelayDirection,
  msg: JsonObject,
) => JsonObject | readonly JsonObject[] | null;

interface Outgoing {
  readonly data: Buffer | string;
  readonly binary: boolean;
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  return Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
}

export interface RelayOptions {
  /** Leave the upstream connection open when the agent's connection dies (as a proxy hiding the drop might). */
  readonly keepUpstreamOnAgentClose?: boolean;
  /** Holds each message from the world this long, in order (a world far away: its answers come late). */
  readonly worldDelayMs?: number;
}

export class PassThroughRelay {
  private readonly sockets = new Set<WebSocket>();
  /** Authorization headers the relay saw from agents, in order. */
  readonly agentAuthorizations: (string | undefined)[] = [];

  private constructor(
    private readonly server: WebSocketServer,
    private readonly upstreamUrl: string,
    private readonly transform: RelayTransform | undefined,
    private readonly keepUpstream: boolean,
    private readonly worldDelayMs: number,
  ) {
    server.on('connection', (agentWs, req) => {
      this.agentAuthorizations.push(req.headers.authorization);
      this.bridge(agentWs);
    });
  }

  static async start(
    upstreamUrl: string,
    transform?: RelayTransform,
    options: RelayOptions = {},
  ): Promise<PassThroughRelay> {
    const server = new WebSocketServer({
      host: '127.0.0.1',
      port: 0,
      handleProtocols: (protocols) => (protocols.has(AWP_SUBPROTOCOL) ? AWP_SUBPROTOCOL : false),
    });
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    return new PassThroughRelay(
      server,
      upstreamUrl,
      transform,
      options.keepUpstreamOnAgentClose ?? false,
      options.worldDelayMs ?? 0,
    );
  }

  get url(): string {
    const { port } = this.server.address() as AddressInfo;
    return `ws://127.0.0.1:${port}`;
  }

  private bridge(agentWs: WebSocket): void {
    const worldWs = new WebSocket(this.upstreamUrl, [AWP_SUBPROTOCOL]);
    this.sockets.add(agentWs);
    this.sockets.add(worldWs);
    const queued: Outgoing[] = [];
    const forward = (to: WebSocket, out: Outgoing): void => {
      if (to.readyState === WebSocket.OPEN) to.send(out.data, { binary: out.binary });
    };
    const rewrite = (direction: RelayDirection, data: RawData, isBinary: boolean): Outgoing[] => {
      if (this.transform === undefined) return [{ data: toBuffer(data), binary: isBinary }];
      const out = this.transform(direction, decodeMessage(data, isBinary));
      const list: readonly JsonObject[] = out === null ? [] : Array.isArray(out) ? out : [out as JsonObject];
      return list.map((msg) => ({ data: JSON.stringify(msg), binary: false }));
    };
    agentWs.on('message', (data, isBinary) => {
      for (const out of rewrite('agent-to-world', data, isBinary)) {
        if (worldWs.readyState === WebSocket.CONNECTING) queued.push(out);
        else forward(worldWs, out);
      }
    });
    worldWs.on('open', () => {
      for (const out of queued.splice(0)) forward(worldWs, out);
    });
    worldWs.on('message', (data, isBinary) => {
      const outs = rewrite('world-to-agent', data, isBinary);
      const send = (): void => outs.forEach((out) => forward(agentWs, out));
      // Timers of one delay run in the order they were set: messages keep their order.
      if (this.worldDelayMs > 0) setTimeout(send, this.worldDelayMs);
      else send();
    });
    agentWs.on('close', () => {
      if (!this.keepUpstream) worldWs.terminate();
    });
    worldWs.on('close', () => agentWs.terminate());
    agentWs.on('error', () => undefined);
    worldWs.on('error', () => undefined);
  }

  /** Drops every connection it relays (both sides, as a network failure would); keeps listening. */
  drop(): void {
    for (const ws of this.sockets) ws.terminate();
    this.sockets.clear();
  }

  async close(): Promise<void> {
    await Promise.all([...this.sockets].map((ws) => terminateAndWait(ws, 1000)));
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
