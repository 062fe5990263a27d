/**
 * Limits on connections that have not completed their handshake (nothing authenticated them yet):
 * each is closed when `timeoutMs` passes without an upgrade, whether or not it sent bytes (slowloris,
 * idle sockets), and sockets over the listener's or one address's cap are closed at once.
 */
import type { Socket } from 'node:net';

export interface HandshakeLimits {
  readonly timeoutMs: number;
  readonly maxPending: number;
  readonly maxPendingPerAddress: number;
}

export type HandshakeCloseReason = 'timeout' | 'listener_limit' | 'address_limit';

/**
 * The pending connections of one listener, each under a key its engine can name it by again when it
 * stops being pending (its upgrade completed, or it closed). `close` must be safe to call for as long
 * as the connection is pending: engines release a connection before its handle goes stale.
 */
export class PendingHandshakes<K> {
  private readonly pending = new Map<K, { address: string; timer: NodeJS.Timeout }>();
  /** The pending connections of each address. */
  private readonly perAddress = new Map<string, Set<K>>();

  constructor(
    private readonly limits: HandshakeLimits,
    private readonly closed: (reason: HandshakeCloseReason) => void,
  ) {}

  /** A new connection: pending until `release`. Returns false if it was over a cap and is closed. */
  admit(key: K, address: string, close: () => void): boolean {
    if (this.pending.size >= this.limits.maxPending) return this.refuse(close, 'listener_limit');
    const ofAddress = this.perAddress.get(address) ?? new Set<K>();
    if (ofAddress.size >= this.limits.maxPendingPerAddress) return this.refuse(close, 'address_limit');
    ofAddress.add(key);
    this.perAddress.set(address, ofAddress);
    const timer = setTimeout(() => {
      if (this.release(key)) this.refuse(close, 'timeout');
    }, this.limits.timeoutMs);
    timer.unref();
    this.pending.set(key, { address, timer });
    return true;
  }

  /** The connection is no longer pending. Returns whether it was. */
  release(key: K): boolean {
    const p = this.pending.get(key);
    if (p === undefined) return false;
    this.pending.delete(key);
    clearTimeout(p.timer);
    const ofAddress = this.perAddress.get(p.address);
    ofAddress?.delete(key);
    if (ofAddress?.size === 0) this.perAddress.delete(p.address);
    return true;
  }

  /** The key of the one connection pending from `address`, if exactly one is. */
  only(address: string): K | undefined {
    const ofAddress = this.perAddress.get(address);
    if (ofAddress?.size !== 1) return undefined;
    return ofAddress.values().next().value;
  }

  /** Forgets every pending connection (the listener is closing and closes them itself). */
  clear(): void {
    for (const key of [...this.pending.keys()]) this.release(key);
  }

  get size(): number {
    return this.pending.size;
  }

  private refuse(close: () => void, reason: HandshakeCloseReason): false {
    close();
    this.closed(reason);
    return false;
  }
}

/** The limits on node:net sockets (the `ws` engine's HTTP server, the WebTransport listener's HTTP/2). */
export class HandshakeGuard {
  /** Pending sockets by `address:port` (the same for a TLS socket and the TCP socket under it). */
  private readonly pending: PendingHandshakes<string>;

  constructor(limits: HandshakeLimits, closed: (reason: HandshakeCloseReason) => void) {
    this.pending = new PendingHandshakes(limits, closed);
  }

  /** A new TCP connection: pending until `done` (its upgrade completed) or its close. */
  admit(socket: Socket): void {
    const key = keyOf(socket);
    if (this.pending.admit(key, socket.remoteAddress ?? '', () => socket.destroy()))
      socket.once('close', () => this.pending.release(key));
  }

  /** The socket's upgrade completed: it is an authenticated connection now, out of these limits. */
  done(socket: Socket): void {
    this.pending.release(keyOf(socket));
  }

  get size(): number {
    return this.pending.size;
  }
}

function keyOf(socket: Socket): string {
  return `${socket.remoteAddress ?? ''}:${socket.remotePort ?? 0}`;
}
