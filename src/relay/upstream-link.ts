/**
 * The relay's link to the world (sans-IO): dialled on the first message that needs the world, messages
 * queued until it is ready, and (for a connection whose initialize was answered from the cache) a
 * handshake in which only that initialize is upstream.
 */
import { TextQueue } from '../protocol/text-queue.js';
import type { FrameRoute, RelayEffect } from './relay-effects.js';

export type UpstreamState = 'none' | 'dialing' | 'handshake' | 'ready' | 'closed';

export class UpstreamLink {
  private current: UpstreamState = 'none';
  private readonly queue: TextQueue;

  /**
   * What waits for the link is bounded like any queue for a peer (a dial, or a handshake the world does
   * not finish, may take long): past `maxQueued` characters, `overflow` runs and nothing more is kept.
   */
  constructor(
    private readonly emit: (e: RelayEffect) => void,
    maxQueued = Infinity,
    private readonly overflow: () => void = () => undefined,
  ) {
    this.queue = new TextQueue(maxQueued);
  }

  get state(): UpstreamState {
    return this.current;
  }

  /** Dialled or open (a close must be mirrored to it). */
  get isOpen(): boolean {
    return this.current !== 'none' && this.current !== 'closed';
  }

  /** Sends now, or queues and dials; once closed, nothing more goes upstream. */
  send(text: string, frame?: FrameRoute): void {
    if (this.current === 'ready') {
      this.emit(frame ? { kind: 'to-upstream', text, frame } : { kind: 'to-upstream', text });
      return;
    }
    if (this.current === 'closed' || this.queue.overflowed) return;
    if (!this.queue.push(text)) {
      this.queue.take(); // the agent is being closed: none of it goes upstream
      return this.overflow();
    }
    if (this.current === 'none') {
      this.current = 'dialing';
      this.emit({ kind: 'dial-upstream' });
    }
  }

  /** The dial completed: send the queue, or first `handshake` alone (the rest waits for `ready`). */
  opened(handshake: string | undefined): void {
    if (handshake !== undefined) {
      this.current = 'handshake';
      this.emit({ kind: 'to-upstream', text: handshake });
    } else this.ready();
  }

  ready(): void {
    this.current = 'ready';
    for (const text of this.takeQueued()) this.emit({ kind: 'to-upstream', text });
  }

  /** Ends the link; an open connection is closed with `code` (none given: the world is already gone). */
  close(code?: number, reason = ''): void {
    if (code !== undefined && this.isOpen) this.emit({ kind: 'close-upstream', code, reason });
    this.current = 'closed';
  }

  /** What was waiting to be sent (the link failed or will not carry it). */
  takeQueued(): string[] {
    return this.queue.take();
  }
}
