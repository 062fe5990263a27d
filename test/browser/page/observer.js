/* global window, WebSocket, console, performance, setTimeout, clearTimeout */
/**
 * A browser dashboard that watches an AWP world through the edge, as plain JS (no build step).
 *
 * A browser cannot set an Authorization header on a WebSocket, so the agent credential travels as the
 * offered subprotocol `awp.bearer.<credential>` next to `awp` (AWP-SEC-005); the same goes for the session
 * token on the `ws` stream connection (AWP-TRN-013). Everything it sees lands in `window.results`, which
 * the test reads; nothing secret is put there.
 */

const HEADER_BYTES = 28;
const FLAG_KEYFRAME = 0x01;
const FLAG_RESYNC = 0x08;

const log = (...args) => console.log('[observer]', ...args);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The session clock of this page, in integer ns (pongs are stamped on it). */
const nowNs = () => Math.round(performance.now() * 1e6);

/** Opens a WebSocket; resolves on `open`, rejects with what the browser reported when it never opens. */
function connect(url, protocols, timeoutMs) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols);
    ws.binaryType = 'arraybuffer';
    const timer = setTimeout(() => reject(new Error(`no open within ${timeoutMs} ms`)), timeoutMs);
    ws.addEventListener('open', () => {
      clearTimeout(timer);
      resolve(ws);
    });
    ws.addEventListener('close', (ev) => {
      clearTimeout(timer);
      reject(new Error(`closed before open: code ${ev.code}`));
    });
  });
}

/** One control connection: JSON-RPC requests with bounded waits, pongs to the edge's pings, inline frames. */
class Control {
  constructor(ws, results) {
    this.ws = ws;
    this.results = results;
    this.nextId = 1;
    this.pending = new Map();
    /** channel_id -> { count, firstFlags, lastSeq } for `obs.frame` notifications. */
    this.inline = new Map();
    ws.addEventListener('message', (ev) => this.onMessage(ev.data));
    ws.addEventListener('close', (ev) => {
      results.control.closed = { code: ev.code, reason: ev.reason, atMs: Math.round(performance.now()) };
      for (const p of this.pending.values()) p.reject(new Error(`connection closed (${ev.code})`));
      this.pending.clear();
    });
  }

  onMessage(data) {
    if (typeof data !== 'string') {
      this.results.control.binaryMessages += 1; // the control connection carries text only
      return;
    }
    const msg = JSON.parse(data);
    if (msg.method === 'ping' && msg.id !== undefined) {
      // Answer the edge's heartbeat (AWP-SAF-001): three silent intervals and the session is lost.
      const t = nowNs();
      this.send({
        jsonrpc: '2.0',
        id: msg.id,
        result: { origin_ns: msg.params.origin_ns, receive_ns: t, transmit_ns: t },
      });
      this.results.control.pingsAnswered += 1;
      return;
    }
    if (msg.method === 'obs.frame') {
      const p = msg.params;
      let c = this.inline.get(p.channel_id);
      if (c === undefined) {
        c = { count: 0, firstFlags: p.flags, lastSeq: -1, afterStream: 0 };
        this.inline.set(p.channel_id, c);
      }
      c.count += 1;
      c.lastSeq = p.seq;
      // Once the stream connection carries a channel, newer frames come only there (AWP-TRN-012); a stale
      // inline frame overtaken by the stream (seq at or below what it delivered) is not counted.
      const s = this.results.stream.channels[String(p.channel_id)];
      if (s !== undefined && p.seq > s.lastSeq) c.afterStream += 1;
      return;
    }
    if (msg.id !== undefined && this.pending.has(msg.id)) {
      const p = this.pending.get(msg.id);
      this.pending.delete(msg.id);
      p.resolve(msg);
      return;
    }
    if (typeof msg.method === 'string') this.results.control.notifications.push(msg.method);
  }

  send(msg) {
    this.ws.send(JSON.stringify(msg));
  }

  /** A request; resolves with `result`, rejects on an error response, a close or after `timeoutMs`. */
  call(method, params, timeoutMs = 5000) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method}: no response within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (msg) => {
          clearTimeout(timer);
          if (msg.error !== undefined) reject(new Error(`${method}: ${JSON.stringify(msg.error)}`));
          else resolve(msg.result);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }
}

/** Reads a binary frame's header with a DataView (little-endian, spec/transport/frames). */
function readHeader(buf) {
  if (buf.byteLength < HEADER_BYTES) return null;
  const v = new DataView(buf);
  const magic = String.fromCharCode(v.getUint8(0), v.getUint8(1), v.getUint8(2), v.getUint8(3));
  return {
    magic,
    version: v.getUint8(4),
    flags: v.getUint8(5),
    channel_id: v.getUint16(6, true),
    seq: Number(v.getBigUint64(8, true)),
    ts_mono_ns: Number(v.getBigUint64(16, true)),
    payload_len: v.getUint32(24, true),
    byteLength: buf.byteLength,
  };
}

/** The `ws` stream connection: binary frames per channel, first frame's flags, seq order. */
function watchStream(ws, results) {
  const channels = results.stream.channels;
  ws.addEventListener('message', (ev) => {
    if (typeof ev.data === 'string') {
      results.stream.textMessages += 1;
      return;
    }
    const h = readHeader(ev.data);
    if (h === null || h.magic !== 'AWPF' || h.version !== 1) {
      results.stream.malformed += 1;
      return;
    }
    const key = String(h.channel_id);
    let c = channels[key];
    if (c === undefined) {
      c = {
        count: 0,
        firstFlags: h.flags,
        firstResyncKeyframe: (h.flags & (FLAG_RESYNC | FLAG_KEYFRAME)) === (FLAG_RESYNC | FLAG_KEYFRAME),
        firstSeq: h.seq,
        lastSeq: h.seq - 1,
        orderViolations: 0,
        lengthMismatches: 0,
      };
      channels[key] = c;
    }
    if (h.seq <= c.lastSeq) c.orderViolations += 1;
    if (h.byteLength < HEADER_BYTES + h.payload_len) c.lengthMismatches += 1;
    c.lastSeq = h.seq;
    c.count += 1;
  });
  ws.addEventListener('close', (ev) => {
    results.stream.closed = { code: ev.code, reason: ev.reason };
  });
}

/** Resolves once `pred()` holds, or after `timeoutMs` (the caller checks what it got). */
async function until(pred, timeoutMs) {
  const end = performance.now() + timeoutMs;
  while (!pred() && performance.now() < end) await sleep(20);
}

/**
 * Watches a world: connect with the credential as a subprotocol, initialize, open an observer session
 * (no embodiment), count inline frames for `inlineMs`, then move the channels to the `ws` stream
 * endpoint and count binary frames, then close the session.
 */
async function observe(cfg) {
  const results = {
    done: false,
    error: null,
    steps: [],
    protocol: null,
    control: { pingsAnswered: 0, notifications: [], binaryMessages: 0, closed: null },
    ready: null,
    inline: {},
    stream: { protocol: null, channels: {}, textMessages: 0, malformed: 0, closed: null },
    closeResult: null,
  };
  window.results = results;
  let control = null;
  let stream = null;
  try {
    const ws = await connect(cfg.edgeUrl, ['awp', `awp.bearer.${cfg.token}`], 5000);
    results.protocol = ws.protocol;
    results.steps.push('open');
    if (ws.protocol !== 'awp') throw new Error(`the edge selected ${JSON.stringify(ws.protocol)}, not "awp"`);
    control = new Control(ws, results);

    const init = await control.call('initialize', {
      protocol_versions: ['0.1'],
      agent: { name: 'browser-dashboard', version: '0.1.0', vendor: 'awp-edge-test' },
      consumes_modalities: ['proprio/json', 'text/event+json'],
    });
    results.steps.push('initialized');
    results.world = init.world?.name ?? null;

    const ready = await control.call('session.open', {
      mode: 'streaming',
      subscribe: [{ channel: 'proprio' }, { channel: 'state' }],
    });
    results.steps.push('ready');
    const granted = (ready.granted?.channels ?? []).map((c) => ({
      channel: c.channel,
      channel_id: c.channel_id,
    }));
    results.ready = {
      session_id: ready.session_id,
      has_session_token: typeof ready.session_token === 'string' && ready.session_token.length > 0,
      heartbeat_interval_ms: ready.heartbeat_interval_ms,
      granted,
      bindings: (ready.stream_endpoints ?? []).map((e) => e.binding),
    };
    log('session ready', ready.session_id, JSON.stringify(granted));

    await sleep(cfg.inlineMs);
    results.inline = snapshotInline(control, granted);
    results.steps.push('inline counted');

    const ep = (ready.stream_endpoints ?? []).find((e) => e.binding === 'ws');
    if (ep === undefined || typeof ep.url !== 'string')
      throw new Error('no ws stream endpoint in session.ready');
    stream = await connect(ep.url, ['awp', `awp.bearer.${ready.session_token}`], 5000);
    results.stream.protocol = stream.protocol;
    results.steps.push('stream open');
    watchStream(stream, results);
    const ids = granted.map((g) => String(g.channel_id));
    await until(
      () => ids.every((id) => (results.stream.channels[id]?.count ?? 0) >= cfg.streamFramesPerChannel),
      cfg.streamMs,
    );
    results.steps.push('stream counted');
    results.inlineAfterStream = snapshotInline(control, granted);

    results.closeResult = await control.call('session.close', {});
    results.steps.push('closed');
  } catch (err) {
    results.error = String(err instanceof Error ? err.message : err);
    console.error('[observer] failed:', results.error);
  } finally {
    stream?.close(1000);
    control?.ws.close(1000);
    results.done = true;
  }
}

function snapshotInline(control, granted) {
  const out = {};
  for (const g of granted) {
    const c = control.inline.get(g.channel_id);
    out[g.channel] = { channel_id: g.channel_id, count: c?.count ?? 0, afterStream: c?.afterStream ?? 0 };
  }
  return out;
}

/** Only the handshake: what the browser reports for an offered credential (open, error, close code). */
function tryConnect(cfg) {
  const results = {
    done: false,
    opened: false,
    errored: false,
    closeCode: null,
    protocol: null,
    error: null,
  };
  window.results = results;
  let ws;
  try {
    ws = new WebSocket(cfg.edgeUrl, ['awp', `awp.bearer.${cfg.token}`]);
  } catch (err) {
    results.error = String(err);
    results.done = true;
    return;
  }
  ws.addEventListener('open', () => {
    results.opened = true;
    results.protocol = ws.protocol;
    ws.close(1000);
  });
  ws.addEventListener('error', () => {
    results.errored = true;
  });
  ws.addEventListener('close', (ev) => {
    results.closeCode = ev.code;
    results.done = true;
  });
}

window.results = null;
window.awpObserve = (cfg) => void observe(cfg);
window.awpTryConnect = tryConnect;
window.awpPageReady = true;
