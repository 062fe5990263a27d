import { describe, expect, it } from 'vitest';
import { Outbox } from '../../src/transport/outbox.js';

/** A socket that accepts writes until it holds `capacity` bytes, then drains on demand. */
class FakeSocket {
  sent: string[] = [];
  bufferedAmount = 0;
  constructor(private readonly capacity: number) {}
  send(data: string | Uint8Array): void {
    const s = typeof data === 'string' ? data : Buffer.from(data).toString();
    this.sent.push(s);
    this.bufferedAmount += s.length;
  }
  flushed(): void {
    this.bufferedAmount = 0;
  }
  get full(): boolean {
    return this.bufferedAmount >= this.capacity;
  }
}

describe('Outbox', () => {
  it('AWP-TRN-009 keeps one pending frame per latest-wins channel, replaced by newer ones', () => {
    const sock = new FakeSocket(10);
    const box = new Outbox(sock, 10, 1 << 20);
    box.push('0123456789', false); // fills the socket
    expect(box.push('A1', false, 1)).toBe('queued');
    expect(box.push('A2', false, 1)).toBe('replaced');
    expect(box.push('A3', false, 1)).toBe('replaced');
    expect(box.push('B1', false, 2)).toBe('queued');
    sock.flushed();
    box.drain();
    expect(sock.sent).toEqual(['0123456789', 'A3', 'B1']);
  });

  it('AWP-TRN-009 writes control messages before any waiting latest-wins frame', () => {
    const sock = new FakeSocket(4);
    const box = new Outbox(sock, 4, 1 << 20);
    box.push('full', false);
    box.push('F1', false, 7);
    box.push('ctl1', false);
    box.push('ctl2', false);
    sock.flushed();
    box.drain();
    expect(sock.sent.slice(1, 2)).toEqual(['ctl1']);
    sock.flushed();
    box.drain();
    sock.flushed();
    box.drain();
    expect(sock.sent).toEqual(['full', 'ctl1', 'ctl2', 'F1']);
  });

  it('AWP-DAT-002 never drops or reorders reliable items', () => {
    const sock = new FakeSocket(1);
    const box = new Outbox(sock, 1, 8);
    box.push('x', false);
    for (const r of ['r1', 'r2', 'r3', 'r4']) expect(box.push(r, false)).toBe('queued');
    box.flushAll();
    expect(sock.sent).toEqual(['x', 'r1', 'r2', 'r3', 'r4']);
  });

  it('past maxQueuedBytes reports overflow (the caller closes the connection), then queues and writes nothing', () => {
    const sock = new FakeSocket(1);
    const box = new Outbox(sock, 1, 8);
    box.push('x', false);
    for (const r of ['r1', 'r2', 'r3', 'r4']) expect(box.push(r, false)).toBe('queued');
    expect(box.push('r5', false)).toBe('overflow');
    expect(box.queuedBytes).toBe(0); // let go: its peer is not reading
    sock.flushed();
    for (let i = 0; i < 1000; i++)
      expect(box.push(`late${i}`, false, i % 2 === 0 ? 1 : undefined)).toBe('overflow');
    expect(box.queuedBytes).toBe(0);
    box.drain();
    box.flushAll();
    expect(sock.sent).toEqual(['x']);
  });

  it("messages the caller holds anyway (a journal's replay) wait whatever their length, in order; what follows them is counted", () => {
    const sock = new FakeSocket(1);
    const box = new Outbox(sock, 1, 8);
    box.push('x', false);
    const replay = Array.from({ length: 100 }, (_, i) => `replayed-${i}`);
    for (const r of replay) expect(box.push(r, false, undefined, undefined, true)).toBe('queued');
    expect(box.push('live1', false)).toBe('queued');
    expect(box.push('live2', false)).toBe('overflow'); // 10 counted bytes: the bound still holds for these
    const fresh = new Outbox(sock, 1, 8);
    sock.sent = [];
    for (const r of replay) fresh.push(r, false, undefined, undefined, true);
    fresh.push('live', false);
    for (let i = 0; i < 200; i++) {
      sock.flushed();
      fresh.drain();
    }
    expect(sock.sent).toEqual([...replay, 'live']);
  });
});
