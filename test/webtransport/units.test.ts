/**
 * The pieces of the WebTransport binding that need no sockets: splitting a stream's bytes back into
 * frames, the dev certificate, the configuration section, and where the endpoints go in
 * `stream_endpoints`.
 */
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, validateConfig } from '../../src/config/load.js';
import { RouteRuntime } from '../../src/edge/route.js';
import { FrameError, peekFrame } from '../../src/protocol/frame.js';
import { loadFrameVectors } from '../harness/spec-data.js';
import { TokenMint } from '../../src/session/tokens.js';
import { certificateHash, createDevCertificate } from '../support/dev-certificate.js';
import { encodeFrame } from '../../src/protocol/frame-encode.js';
import {
  FrameSkipper,
  FrameSplitter,
  FrameTooLarge,
  IncomingFrames,
  PartialFramesTooLarge,
} from '../../src/transport/webtransport-framing.js';
import { readIncomingStreams, type WebTransportSession } from '../../src/transport/webtransport.js';

const vectors = loadFrameVectors();
const valid = vectors.filter((v) => v.expect !== undefined).map((v) => Buffer.from(v.hex, 'hex'));

describe('frames back to back on a stream', () => {
  it('AWP-DAT-008 recovers every valid vector from one byte stream cut at every chunk size', () => {
    const stream = Buffer.concat(valid);
    for (let size = 1; size <= 64; size++) {
      const splitter = new FrameSplitter(1 << 20);
      const out: Buffer[] = [];
      for (let at = 0; at < stream.length; at += size)
        out.push(...splitter.push(stream.subarray(at, at + size)));
      expect(out.map((b) => b.toString('hex'))).toEqual(valid.map((b) => b.toString('hex')));
      expect(splitter.pending).toBe(0);
      expect(() => splitter.end()).not.toThrow();
    }
  });

  it('AWP-DAT-008 reassembles a frame sent in 200,000 one-byte chunks, then the frame after it', () => {
    const payload = Buffer.alloc(200_000, 7);
    const big = encodeFrame({ channel_id: 1, seq: 1, ts_mono_ns: 1, flags: 0, vendor: [], payload });
    const stream = Buffer.concat([big, valid[0]!]);
    const splitter = new FrameSplitter(1 << 20);
    const out: Buffer[] = [];
    for (let at = 0; at < big.length; at++) out.push(...splitter.push(stream.subarray(at, at + 1)));
    out.push(...splitter.push(stream.subarray(big.length)));
    expect(out.map((b) => b.length)).toEqual([big.length, valid[0]!.length]);
    expect(out[0]!.equals(big)).toBe(true);
    expect(splitter.pending).toBe(0);
  });

  it('AWP-DAT-010 refuses a bad magic or version as soon as those bytes arrive', () => {
    for (const name of ['bad_magic', 'unknown_version']) {
      const v = Buffer.from(vectors.find((x) => x.name === name)!.hex, 'hex');
      const splitter = new FrameSplitter(1 << 20);
      expect(() => {
        for (let i = 0; i < 6; i++) splitter.push(v.subarray(i, i + 1));
      }).toThrow(FrameError);
    }
    expect(() => new FrameSplitter(1 << 20).push(Buffer.from('GET '))).toThrow(FrameError);
  });

  it('AWP-TRN-011 refuses a frame above max_frame_bytes from its header alone', () => {
    const header = Buffer.from(valid[0]!.subarray(0, 28));
    header.writeUInt32LE(100_000, 24);
    expect(() => new FrameSplitter(65_536).push(header)).toThrow(FrameTooLarge);
  });

  it('AWP-DAT-010 a stream that ends inside a frame is a truncated frame', () => {
    const splitter = new FrameSplitter(1 << 20);
    expect(splitter.push(valid[1]!.subarray(0, 40))).toEqual([]);
    expect(() => splitter.end()).toThrow(FrameError);
  });
});

describe("frames on an observer's stream (checked, then dropped)", () => {
  it('AWP-DAT-008 AWP-DAT-010 checks every vector cut at every chunk size, holding at most a header and extension block', () => {
    const stream = Buffer.concat(valid);
    for (let size = 1; size <= 64; size++) {
      const skipper = new FrameSkipper(1 << 20);
      for (let at = 0; at < stream.length; at += size)
        expect(skipper.push(stream.subarray(at, at + size))).toEqual([]);
      expect(skipper.pending).toBe(0);
      expect(() => skipper.end()).not.toThrow();
    }
    // Every invalid vector that a reader of whole frames refuses, this one refuses too.
    const invalid = vectors.filter((v) => v.expect === undefined).map((v) => Buffer.from(v.hex, 'hex'));
    for (const v of invalid) {
      let whole: unknown;
      try {
        for (const buf of new FrameSplitter(1 << 20).push(v)) peekFrame(buf);
      } catch (err) {
        whole = err;
      }
      if (!(whole instanceof FrameError)) continue; // a truncated vector: still waiting for bytes
      expect(() => new FrameSkipper(1 << 20).push(v), v.toString('hex')).toThrow(FrameError);
    }
  });

  it('drops a payload as it arrives, then checks the frame after it', () => {
    const payload = Buffer.alloc(500_000, 7);
    const big = encodeFrame({ channel_id: 1, seq: 1, ts_mono_ns: 1, flags: 0, vendor: [], payload });
    const skipper = new FrameSkipper(1 << 20);
    for (let at = 0; at < big.length - 1; at += 4096) {
      skipper.push(big.subarray(at, Math.min(at + 4096, big.length - 1)));
      expect(skipper.pending).toBeLessThanOrEqual(28);
    }
    expect(() => skipper.end()).toThrow(FrameError); // one byte short: ends inside the frame
    skipper.push(big.subarray(big.length - 1));
    expect(() => skipper.end()).not.toThrow();
    expect(() => skipper.push(Buffer.from('AWPX'))).toThrow(FrameError);
    const header = Buffer.from(valid[0]!.subarray(0, 28));
    header.writeUInt32LE(2 << 20, 24);
    expect(() => new FrameSkipper(1 << 20).push(header)).toThrow(FrameTooLarge);
  });
});

describe("unfinished frames across a session's streams", () => {
  const header = (payloadLen: number) => {
    const h = Buffer.from(valid[0]!.subarray(0, 28));
    h[5] = h[5]! & ~0x04; // no extension block
    h.writeUInt32LE(payloadLen, 24);
    return h;
  };

  it('bounds what all the streams hold together, not each alone', () => {
    const incoming = new IncomingFrames(() => new FrameSplitter(1 << 20), 100_000);
    const streams = [{}, {}, {}];
    incoming.push(streams[0]!, Buffer.concat([header(60_000), Buffer.alloc(40_000)]));
    expect(incoming.pending).toBe(40_028);
    incoming.push(streams[1]!, Buffer.concat([header(60_000), Buffer.alloc(40_000)]));
    expect(() => incoming.push(streams[2]!, Buffer.concat([header(60_000), Buffer.alloc(40_000)]))).toThrow(
      PartialFramesTooLarge,
    );
    // The session is ending: nothing more is held or reported.
    expect(incoming.pending).toBe(0);
    expect(incoming.push(streams[0]!, Buffer.alloc(20_000))).toEqual([]);
    expect(() => incoming.end(streams[1]!, true)).not.toThrow();
  });

  it('what a stream held goes with it: completed, reset, or ended inside a frame (malformed)', () => {
    const incoming = new IncomingFrames(() => new FrameSplitter(1 << 20), 100_000);
    const [a, b, c] = [{}, {}, {}];
    incoming.push(a, Buffer.concat([header(80_000), Buffer.alloc(60_000)]));
    expect(incoming.push(a, Buffer.alloc(20_000)).map((f) => f.length)).toEqual([80_028]);
    incoming.push(b, Buffer.concat([header(80_000), Buffer.alloc(60_000)]));
    incoming.end(b, false); // reset by the peer
    expect(incoming.pending).toBe(0);
    incoming.push(c, Buffer.concat([header(80_000), Buffer.alloc(60_000)]));
    expect(() => incoming.end(c, true)).toThrow(FrameError);
  });
});

describe('dev certificate', () => {
  it('is ECDSA P-256, valid at most 14 days, for the given hosts, pinned by the SHA-256 of its DER', () => {
    const c = createDevCertificate({ hosts: ['localhost', '127.0.0.1', '::1'] });
    const x = new X509Certificate(c.cert);
    expect(x.publicKey.asymmetricKeyDetails).toMatchObject({ namedCurve: 'prime256v1' });
    expect(x.verify(x.publicKey)).toBe(true);
    expect(x.checkPrivateKey(createPrivateKey(c.key))).toBe(true);
    const span = new Date(x.validTo).getTime() - new Date(x.validFrom).getTime();
    expect(span).toBeLessThanOrEqual(14 * 86_400_000);
    expect(new Date(x.validFrom).getTime()).toBeLessThanOrEqual(Date.now());
    expect(x.checkHost('localhost')).toBe('localhost');
    expect(x.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(x.checkIP('::1')).toBe('::1');
    expect(c.hash.equals(createHash('sha256').update(x.raw).digest())).toBe(true);
    expect(certificateHash(c.cert).equals(c.hash)).toBe(true);
    expect(c.fingerprint).toBe(x.fingerprint256);
  });

  it('refuses a validity longer than 14 days (hash-pinned certificates fail the handshake)', () => {
    expect(() => createDevCertificate({ days: 15 })).toThrow(RangeError);
    expect(() => createDevCertificate({ days: 14 })).not.toThrow();
  });
});

describe('configuration', () => {
  const dir = mkdtempSync(join(tmpdir(), 'awp-edge-wt-config-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const a = createDevCertificate();
  const b = createDevCertificate();
  writeFileSync(join(dir, 'a.crt'), a.cert);
  writeFileSync(join(dir, 'a.key'), a.key);
  writeFileSync(join(dir, 'b.key'), b.key);
  const base = {
    listen: '127.0.0.1:0',
    routes: [{ path: '/', upstream: 'ws://127.0.0.1:1/' }],
    agents: { tokens: ['t'] },
  };

  it('reads the listener address, certificate and key; absent means no endpoint', () => {
    const c = validateConfig(
      {
        ...base,
        webtransport: {
          listen: '127.0.0.1:4433',
          cert_file: join(dir, 'a.crt'),
          key_file: join(dir, 'a.key'),
        },
      },
      'test',
      {},
    );
    expect(c.webtransport).toMatchObject({
      listen: { host: '127.0.0.1', port: 4433 },
      cert: a.cert,
      key: a.key,
    });
    expect(validateConfig(base, 'test', {}).webtransport).toBeUndefined();
  });

  it('names the key and the problem for a mismatched key, a missing file, or an unknown key', () => {
    const problems = (wt: Record<string, unknown>): string[] => {
      try {
        validateConfig({ ...base, webtransport: wt }, 'test', {});
      } catch (err) {
        if (err instanceof ConfigError) return [...err.problems];
        throw err;
      }
      return [];
    };
    expect(
      problems({ listen: '127.0.0.1:4433', cert_file: join(dir, 'a.crt'), key_file: join(dir, 'b.key') }),
    ).toEqual(['test: webtransport.key_file: the private key does not match the certificate']);
    expect(
      problems({
        listen: '127.0.0.1:4433',
        cert_file: join(dir, 'missing.crt'),
        key_file: join(dir, 'a.key'),
      })[0],
    ).toMatch(/^test: webtransport\.cert_file: cannot read .*missing\.crt/);
    expect(problems({ cert_file: join(dir, 'a.crt'), key_file: join(dir, 'a.key'), port: 1 })).toEqual([
      'test: webtransport.port: unknown key (expected one of: listen, cert_file, key_file)',
      'test: webtransport.listen: required: HOST:PORT (HTTP/2 on TCP, and HTTP/3 on UDP where available)',
    ]);
  });
});

describe('stream_endpoints', () => {
  const route = () =>
    new RouteRuntime(
      validateConfig(
        { routes: [{ name: 'arm', path: '/arm', upstream: 'ws://w/' }], agents: { tokens: ['t'] } },
        'test',
        {},
      ).routes[0]!,
      new TokenMint(),
    );
  const world = [
    { binding: 'ws', url: 'ws://world/stream', max_frame_bytes: 1 << 20 },
    { binding: 'grpc', url: 'https://world/grpc' },
    { binding: 'ws', url: 'ws://world/stream2', channels: [2] },
    { binding: 'inline' },
  ];

  it('AWP-TRN-004 without a webtransport listener: ws relayed, inline last', () => {
    const r = route();
    expect(r.observerEndpoints('ws://edge:8720').map((e) => e.binding)).toEqual(['ws', 'inline']);
    expect(r.edgeEndpoints('ws://edge:8720', world).map((e) => e.binding)).toEqual(['ws', 'ws', 'inline']);
  });

  it('AWP-TRN-004 AWP-ROB-006 AWP-TRN-011 with one: a webtransport endpoint per world ws endpoint, first, keeping channels and max_frame_bytes', () => {
    const r = route();
    r.enableWebTransport(4433);
    expect(r.observerEndpoints('ws://edge.example:8720')).toEqual([
      { binding: 'webtransport', url: 'https://edge.example:4433/arm/stream' },
      { binding: 'ws', url: 'ws://edge.example:8720/arm/stream' },
      { binding: 'inline' },
    ]);
    expect(r.edgeEndpoints('wss://[::1]:8720', world)).toEqual([
      { binding: 'webtransport', url: 'https://[::1]:4433/arm/stream', max_frame_bytes: 1 << 20 },
      { binding: 'webtransport', url: 'https://[::1]:4433/arm/stream/2', channels: [2] },
      { binding: 'ws', url: 'wss://[::1]:8720/arm/stream', max_frame_bytes: 1 << 20 },
      { binding: 'ws', url: 'wss://[::1]:8720/arm/stream/2', channels: [2] },
      { binding: 'inline' },
    ]);
  });
});

describe('streams the peer opens', () => {
  /** A session whose peer opened the given streams (web streams, as the library hands them over). */
  const sessionWith = (streams: ReadableStream<Uint8Array>[]) =>
    ({
      incomingUnidirectionalStreams: new ReadableStream({
        start(c) {
          for (const s of streams) c.enqueue(s);
          c.close();
        },
      }),
      incomingBidirectionalStreams: new ReadableStream({ start: (c) => c.close() }),
      datagrams: { readable: new ReadableStream({ start: (c) => c.close() }) },
    }) as unknown as WebTransportSession;

  it('a stream the peer resets ends too (not finished), so what was held for it can go', async () => {
    const ended = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new Uint8Array([1]));
        c.close();
      },
    });
    let sent = false; // one chunk (say, a frame's header), then the peer resets the stream
    const reset = new ReadableStream<Uint8Array>(
      {
        pull(c) {
          if (sent) return c.error(new Error('reset by the peer'));
          sent = true;
          c.enqueue(new Uint8Array([2]));
        },
      },
      { highWaterMark: 0 },
    );
    const seen: string[] = [];
    const name = (s: object) => (s === ended ? 'ended' : 'reset');
    await new Promise<void>((resolve) => {
      setTimeout(resolve, 5_000).unref(); // without a second `end`, the expectation below says so
      readIncomingStreams(sessionWith([ended, reset]), {
        chunk: (s, data) => seen.push(`${name(s)}:chunk ${data[0]}`),
        end: (s, finished) => {
          seen.push(`${name(s)}:end ${finished}`);
          if (seen.filter((e) => e.includes(':end')).length === 2) resolve();
        },
        datagram: () => undefined,
      });
    });
    expect(seen.sort()).toEqual(['ended:chunk 1', 'ended:end true', 'reset:chunk 2', 'reset:end false']);
  });
});
