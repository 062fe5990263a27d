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

export class HandshakeGuard {
  /** Pending sockets by `address:port` (the same for a TLS socket and the TCP socket under it). */
  private readonly pending = new Map<string, { socket: Socket; timer: NodeJS.Timeout }>();
  private readonly perAddress = new Map<string, number>();

  constructor(
    private readonly limits: HandshakeLimits,
    private readonly closed: (reason: HandshakeCloseReason) => void,
  ) {}

  /** A new TCP connection: pending until `done` (its upgrade completed) or its close. */
  admit(socket: Socket): void {
    const address = socket.remoteAddress ?? '';
    const key = `${address}:${socket.remotePort ?? 0}`;
    if (this.pending.size >= this.limits.maxPending) return this.refuse(socket, 'listener_limit');
    const n = this.perAddress.get(address) ?? 0;
    if (n >= this.limits.maxPendingPerAddress) return this.refuse(socket, 'address_limit');
    this.perAddress.set(address, n + 1);
    const timer = setTimeout(() => {
      if (this.release(key)) this.refuse(socket, 'timeout');
    }, this.limits.timeoutMs);
    timer.unref();
    this.pending.set(key, { socket, timer });
    socket.once('close', () => this.release(key));
  }

  /** The socket's upgrade completed: it is an authenticated connection now, out of these limits. */
  done(socket: Socket): void {
    this.release(`${socket.remoteAddress ?? ''}:${socket.remotePort ?? 0}`);
  }

  get size(): number {
    return this.pending.size;
  }

  private release(key: string): boolean {
    const p = this.pending.get(key);
    if (p === undefined) return false;
    this.pending.delete(key);
    clearTimeout(p.timer);
    const address = p.socket.remoteAddress ?? '';
    const n = (this.perAddress.get(address) ?? 1) - 1;
    if (n <= 0) this.perAddress.delete(address);
    else this.perAddress.set(address, n);
    return true;
  }

  private refuse(socket: Socket, reason: HandshakeCloseReason): void {
    socket.destroy();
    this.closed(reason);
  }
}
