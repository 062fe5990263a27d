/* global WebSocket, TextDecoder, performance, setTimeout, clearTimeout, atob */
/**
 * The reference browser client of awp-edge: one observer session (no embodiment) through the edge.
 *
 * A browser cannot set an Authorization header on a WebSocket, so the credential is the offered subprotocol
 * `awp.bearer.<credential>` next to `awp` (AWP-SEC-005); the session token does the same on the `ws` stream
 * endpoint (AWP-TRN-013). Never in a URL: the edge refuses any query string (AWP-SEC-006). When the
 * connection drops (the edge restarts, a network blip), it reconnects and resumes with `session.resume`
 * and its last `status_seq`; a session the edge no longer holds is opened anew.
 */

/** Modalities this page can show; channels of others are listed, not subscribed. */
export const SHOWN_MODALITIES = ['image/raw', 'proprio/json', 'text/event+json'];

const HEADER_BYTES = 28;
const FLAG_HAS_EXTENSIONS = 0x04;
const utf8 = new TextDecoder();

/** Integer ns on this page's clock (pongs are stamped with it). */
const nowNs = () => Math.round(performance.now() * 1e6);

/** Decodes a binary frame (spec/transport/frames: 28-byte little-endian header, optional TLVs). */
export function decodeFrame(buf) {
  if (buf.byteLength < HEADER_BYTES) return null;
  const v = new DataView(buf);
  if (v.getUint32(0, false) !== 0x41575046 || v.getUint8(4) !== 1) return null; // "AWPF", version 1
  const flags = v.getUint8(5);
  const len = v.getUint32(24, true);
  let offset = HEADER_BYTES;
  if ((flags & FLAG_HAS_EXTENSIONS) !== 0) offset += 2 + v.getUint16(HEADER_BYTES, true);
  if (buf.byteLength < offset + len) return null;
  return {
    flags,
    channel_id: v.getUint16(6, true),
    seq: Number(v.getBigUint64(8, true)),
    ts_mono_ns: Number(v.getBigUint64(16, true)),
    payload: new Uint8Array(buf, offset, len),
  };
}

function base64Bytes(b64) {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** The payload as the page uses it: parsed JSON for JSON modalities, bytes otherwise. */
export function payloadValue(modality, bytes) {
  if (modality.endsWith('json')) {
    try {
      return JSON.parse(utf8.decode(bytes));
    } catch {
      return undefined;
    }
  }
  return bytes;
}

/**
 * One route's observer session. Callbacks: manifest(m), frame(channel, frame), note(method, params),
 * status(text, kind), granted(channels).
 */
export class ObserverClient {
  constructor(url, token, on) {
    this.url = url;
    this.token = token;
    this.on = on;
    this.ws = null;
    this.stream = null;
    this.nextId = 1;
    this.pending = new Map();
    this.manifest = null;
    this.session = null; // { token, lastSeq, id }
    this.channels = new Map(); // channel_id -> declaration
    this.stopped = false;
    this.retryMs = 250;
    this.counts = { connects: 0, opens: 0, resumes: 0, resumeRefused: 0, drops: 0 };
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    this.ws?.close(1000, 'viewer closed');
    this.stream?.close(1000, 'viewer closed');
  }

  connect() {
    if (this.stopped) return;
    this.on.status('connecting', 'wait');
    const ws = new WebSocket(this.url, ['awp', `awp.bearer.${this.token}`]);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    let opened = false;
    ws.addEventListener('open', () => {
      opened = true;
      this.counts.connects++;
      this.retryMs = 250;
      this.establish().catch((err) => {
        this.on.status(`error: ${err.message}`, 'bad');
        ws.close(1000, 'retrying');
      });
    });
    ws.addEventListener('message', (ev) => this.onMessage(ev.data));
    ws.addEventListener('close', (ev) => {
      if (this.ws !== ws) return;
      for (const p of this.pending.values()) p.reject(new Error(`connection closed (${ev.code})`));
      this.pending.clear();
      this.stream?.close(1000, 'control connection lost');
      this.stream = null;
      if (this.stopped) return;
      this.counts.drops++;
      // A refused upgrade (e.g. 401 for a wrong credential) never opens; the browser does not say why.
      this.on.status(
        opened
          ? `connection lost (${ev.code}): reconnecting`
          : 'cannot connect (edge down or credential refused): retrying',
        'bad',
      );
      const wait = this.retryMs;
      this.retryMs = Math.min(5000, this.retryMs * 2);
      setTimeout(() => this.connect(), wait);
    });
  }

  async establish() {
    const init = await this.call('initialize', {
      protocol_versions: ['0.1'],
      agent: { name: 'awp-edge-viewer', version: '0.1.0', vendor: 'awp-edge' },
      consumes_modalities: SHOWN_MODALITIES,
    });
    this.manifest = init;
    this.on.manifest(init);
    if (this.session !== null) {
      try {
        const r = await this.call('session.resume', {
          session_token: this.session.token,
          last_status_seq: this.session.lastSeq,
        });
        this.counts.resumes++;
        this.ready(r, 'resumed');
        return;
      } catch (err) {
        // The edge no longer holds it (e.g. it restarted): a new session.
        this.counts.resumeRefused++;
        this.on.note('viewer', { detail: `resume refused: ${err.message}; opening a new session` });
        this.session = null;
      }
    }
    const shown = (init.observation_channels ?? []).filter((c) => SHOWN_MODALITIES.includes(c.modality));
    const r = await this.call('session.open', {
      mode: (init.time_models ?? ['streaming'])[0],
      subscribe: shown.map((c) => ({ channel: c.id })),
    });
    this.counts.opens++;
    this.session = { token: r.session_token, lastSeq: 0, id: r.session_id };
    this.ready(r, 'opened');
  }

  ready(r, how) {
    if (typeof r.session_token === 'string') this.session.token = r.session_token;
    if (typeof r.session_id === 'string') this.session.id = r.session_id;
    const decls = new Map((this.manifest.observation_channels ?? []).map((c) => [c.id, c]));
    this.channels.clear();
    for (const g of r.granted?.channels ?? []) {
      const d = decls.get(g.channel);
      if (d !== undefined) this.channels.set(g.channel_id, { ...d, grant: g });
    }
    this.on.granted([...this.channels.values()]);
    this.on.status(`${how}: ${this.session.id}`, 'ok');
    const ep = (r.stream_endpoints ?? []).find((e) => e.binding === 'ws');
    if (ep !== undefined && typeof ep.url === 'string') this.openStream(ep.url);
  }

  /** Binary frames on the `ws` stream endpoint; the control connection carries them inline until then. */
  openStream(url) {
    const ws = this.ws;
    const stream = new WebSocket(url, ['awp', `awp.bearer.${this.session.token}`]);
    stream.binaryType = 'arraybuffer';
    this.stream = stream;
    stream.addEventListener('message', (ev) => {
      if (typeof ev.data === 'string') return;
      const f = decodeFrame(ev.data);
      if (f !== null) this.deliver(f);
    });
    stream.addEventListener('close', () => {
      if (this.stream !== stream) return;
      this.stream = null;
      // Control still up: its frames come inline meanwhile; try the stream again shortly.
      if (!this.stopped && this.ws === ws && ws.readyState === WebSocket.OPEN)
        setTimeout(() => this.ws === ws && this.stream === null && this.openStream(url), 1000);
    });
  }

  deliver(f) {
    const ch = this.channels.get(f.channel_id);
    if (ch === undefined) return;
    this.on.frame(ch, { ...f, value: payloadValue(ch.modality, f.payload) });
  }

  onMessage(data) {
    if (typeof data !== 'string') return; // the control connection carries text only
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    if (msg.method === 'ping' && msg.id !== undefined) {
      // Answer the edge's heartbeat (AWP-SAF-001): three silent intervals and the session is lost.
      const t = nowNs();
      this.send({
        jsonrpc: '2.0',
        id: msg.id,
        result: { origin_ns: msg.params?.origin_ns ?? 0, receive_ns: t, transmit_ns: t },
      });
      return;
    }
    if (msg.id !== undefined && msg.method === undefined) {
      const p = this.pending.get(msg.id);
      if (p === undefined) return;
      this.pending.delete(msg.id);
      if (msg.error !== undefined)
        p.reject(new Error(`${msg.error.message ?? 'error'} ${JSON.stringify(msg.error.data ?? {})}`));
      else p.resolve(msg.result);
      return;
    }
    const params = msg.params ?? {};
    if (typeof params.status_seq === 'number' && this.session !== null)
      this.session.lastSeq = Math.max(this.session.lastSeq, params.status_seq);
    if (msg.method === 'obs.frame') {
      this.deliver({ ...params, payload: base64Bytes(params.payload_b64 ?? '') });
      return;
    }
    if (typeof msg.method === 'string') this.on.note(msg.method, params);
  }

  send(msg) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  call(method, params, timeoutMs = 10000) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }
}
