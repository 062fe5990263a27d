/* global window, document, sessionStorage, location, history, fetch, requestAnimationFrame, setInterval, performance, uPlot */
/**
 * The live viewer: one panel per route of the edge, each an observer session (client.js). Frames only
 * update per-channel state (latest wins, samples appended); drawing happens once per display frame
 * (requestAnimationFrame), so 100 Hz channels cost one canvas draw and one plot update per frame.
 *
 * The credential: from the URL fragment `#token=...` (fragments never reach a server; it is removed from the
 * address bar at once), else typed into the form; kept in sessionStorage (this tab only) until "Forget".
 */
import { ObserverClient, SHOWN_MODALITIES } from './client.js';
import { drawGrid, drawImage } from './draw.js';

const TOKEN_KEY = 'awp-edge-viewer-token';
const PLOT_WINDOW_S = 10;
const LOG_LINES = 200;

const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
};

/** What the tests (and a curious user, in the console) can read; nothing secret. */
const state = { routes: {}, statsUpdates: 0, frames: 0 };
window.awpViewer = state;

function takeToken() {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m !== null) {
    sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
    history.replaceState(null, '', location.pathname); // off the address bar and out of the history
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Numeric leaves of a JSON value, as [name, number] (`p_m[0]`, `avatar[1]`, ...). */
function numericLeaves(v, prefix = '', out = []) {
  if (typeof v === 'number' && Number.isFinite(v)) out.push([prefix, v]);
  else if (Array.isArray(v)) v.forEach((x, i) => numericLeaves(x, `${prefix}[${i}]`, out));
  else if (v !== null && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) numericLeaves(x, prefix === '' ? k : `${prefix}.${k}`, out);
  return out;
}

const COLOURS = ['#e4572e', '#29335c', '#17bebb', '#f3a712', '#669bbc', '#a8c686', '#8e5572', '#3d405b'];

/** One channel's view: an image canvas, a grid picture, and/or a time-series plot; drawn when dirty. */
class ChannelView {
  constructor(route, decl, parent) {
    this.route = route;
    this.decl = decl;
    this.latest = null;
    this.dirty = false;
    this.frames = 0;
    this.merged = null; // keyframe + deltas of an event channel
    this.box = el(
      'div',
      { class: 'channel' },
      el(
        'h3',
        {},
        `${decl.id} `,
        el(
          'small',
          {},
          `${decl.modality}, ${typeof decl.grant?.rate_hz === 'number' ? `${decl.grant.rate_hz} Hz` : 'per tick'}`,
        ),
      ),
    );
    this.info = el('div', { class: 'info' });
    this.box.append(this.info);
    parent.append(this.box);
    if (decl.modality === 'image/raw') {
      this.canvas = el('canvas', { class: 'camera', 'data-channel': decl.id });
      this.box.append(this.canvas);
    }
    this.series = null; // names of plotted numeric leaves
    this.xs = [];
    this.ys = [];
  }

  onFrame(f) {
    this.frames++;
    this.latest = f;
    this.dirty = true;
    if (this.decl.modality.endsWith('json') && f.value !== undefined) {
      const keyframe = (f.flags & 0x01) !== 0 || this.decl.loss_class !== 'reliable' || this.merged === null;
      this.merged = keyframe || typeof f.value !== 'object' ? f.value : { ...this.merged, ...f.value };
      const leaves = numericLeaves(this.merged);
      if (this.series === null && leaves.length > 0) this.makePlot(leaves.map(([n]) => n));
      if (this.series !== null) {
        const byName = new Map(leaves);
        const t = f.ts_mono_ns / 1e9;
        // A new session clock (a new world session after a restart): start the plot afresh.
        if (this.xs.length > 0 && t < this.xs[this.xs.length - 1]) {
          this.xs = [];
          this.ys = this.series.map(() => []);
        }
        this.xs.push(t);
        this.series.forEach((n, i) => this.ys[i].push(byName.get(n) ?? null));
        // Trimmed here too, not only when drawn: a hidden tab gets no animation frames but keeps its data.
        if (this.xs[0] < t - PLOT_WINDOW_S - 2) this.trim();
      }
      if (this.decl.modality === 'text/event+json') this.route.logEvent(this.decl.id, this.merged);
    }
  }

  makePlot(names) {
    this.series = names.slice(0, COLOURS.length);
    this.ys = this.series.map(() => []);
    // A cell world without a camera of its own: draw its picture from the JSON.
    const camera = [...this.route.views.values()].some((v) => v.decl.modality === 'image/raw');
    if (!camera && Object.prototype.hasOwnProperty.call(this.merged ?? {}, 'avatar')) {
      this.grid = el('canvas', { class: 'grid', width: '240', height: '240', 'data-channel': this.decl.id });
      this.box.append(this.grid);
    }
    const target = el('div', { class: 'plot', 'data-channel': this.decl.id });
    this.box.append(target);
    this.plot = new uPlot(
      {
        width: 420,
        height: 160,
        scales: { x: { time: false } },
        legend: { live: false },
        cursor: { show: false },
        series: [
          { label: 's' },
          ...this.series.map((n, i) => ({
            label: n,
            stroke: COLOURS[i],
            width: 1.5,
            points: { show: false },
          })),
        ],
        axes: [{ size: 30 }, { size: 45 }],
      },
      [[], ...this.series.map(() => [])],
      target,
    );
  }

  draw() {
    if (!this.dirty) return;
    this.dirty = false;
    const f = this.latest;
    this.info.textContent = `seq ${f.seq} · ${this.frames} frames seen`;
    if (this.canvas !== undefined) this.drawImage(f.value);
    if (this.grid !== undefined) this.drawGrid(this.merged);
    if (this.plot !== undefined && this.xs.length > 0) {
      this.trim();
      this.plot.setData([this.xs, ...this.ys]);
    }
  }

  /** Keeps the plot's window of samples. */
  trim() {
    const cut = this.xs.findIndex((x) => x >= this.xs[this.xs.length - 1] - PLOT_WINDOW_S);
    if (cut > 0) {
      this.xs.splice(0, cut);
      for (const y of this.ys) y.splice(0, cut);
    }
  }

  drawImage(bytes) {
    const problem = drawImage(this.canvas, this.decl.schema ?? {}, bytes);
    if (problem !== null) this.info.textContent += ` · ${problem}`;
  }

  drawGrid(v) {
    if (Array.isArray(v?.avatar)) drawGrid(this.grid, this.route.gridSize(v), v);
  }
}

/** One route: its observer session, its channels, its log, its manifest and the edge's figures for it. */
class RouteView {
  constructor(route, token, parent) {
    this.name = route.name;
    this.views = new Map();
    this.lastEvent = new Map();
    const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${route.path}`;
    this.status = el('span', { class: 'status wait' }, 'connecting');
    this.world = el('span', { class: 'world' }, route.path);
    this.channelsBox = el('div', { class: 'channels' });
    this.statsBox = el('div', { class: 'stats' }, 'waiting for the edge’s figures');
    this.log = el('ol', { class: 'log' });
    this.manifestBox = el('pre', {});
    const section = el(
      'section',
      { class: 'route', 'data-route': route.name },
      el('header', {}, el('h2', {}, route.name, ' '), this.world, this.status),
      this.channelsBox,
      el(
        'div',
        { class: 'side' },
        el('h3', {}, 'edge: forward latency, staleness, drops'),
        this.statsBox,
        el('h3', {}, 'events and session states'),
        this.log,
        el('details', {}, el('summary', {}, 'manifest'), this.manifestBox),
      ),
    );
    parent.append(section);
    this.model = { status: 'connecting', world: null, channels: {}, client: null };
    state.routes[route.name] = this.model;
    this.client = new ObserverClient(url, token, {
      status: (text, kind) => {
        this.status.textContent = text;
        this.status.className = `status ${kind}`;
        this.model.status = text;
      },
      manifest: (m) => {
        this.manifest = m;
        this.model.world = m.world?.name ?? null;
        this.world.textContent = `${m.world?.name ?? '?'} ${m.world?.version ?? ''} · ${route.path} · ${(m.time_models ?? []).join(', ')}`;
        this.manifestBox.textContent = JSON.stringify(m, null, 2);
        const hidden = (m.observation_channels ?? []).filter((c) => !SHOWN_MODALITIES.includes(c.modality));
        if (hidden.length > 0)
          this.logLine(`not shown: ${hidden.map((c) => `${c.id} (${c.modality})`).join(', ')}`);
      },
      granted: (decls) => {
        for (const d of decls)
          if (!this.views.has(d.id)) this.views.set(d.id, new ChannelView(this, d, this.channelsBox));
      },
      frame: (decl, f) => {
        state.frames++;
        this.views.get(decl.id)?.onFrame(f);
        this.model.channels[decl.id] = (this.model.channels[decl.id] ?? 0) + 1;
      },
      note: (method, p) => {
        if (method === 'session.telemetry') return; // once a second: the figures below say more
        this.logLine(`${method} ${p.state ?? ''} ${p.reason ?? p.detail ?? p.action_id ?? ''}`);
      },
    });
    this.model.client = this.client.counts;
    this.client.start();
  }

  gridSize(v) {
    const desc = (this.manifest?.embodiments ?? []).map((e) => e.description ?? '').join(' ');
    const m = /(\d+)x(\d+)/.exec(desc);
    if (m !== null) return [Number(m[1]), Number(m[2])];
    const n = Math.max(
      5,
      ...[v.avatar, v.goal]
        .filter(Array.isArray)
        .flat()
        .map((c) => c + 1),
    );
    return [n, n];
  }

  logEvent(channel, value) {
    const text = JSON.stringify(value);
    if (this.lastEvent.get(channel) === text) return;
    this.lastEvent.set(channel, text);
    this.logLine(`${channel} ${text}`);
  }

  logLine(text) {
    const time = new Date().toISOString().slice(11, 23);
    this.log.prepend(el('li', {}, `${time} ${text}`));
    while (this.log.childElementCount > LOG_LINES) this.log.lastElementChild.remove();
  }

  showStats(r) {
    const fmt = (q) => (q.p50_ms === null ? '–' : `${q.p50_ms.toFixed(3)} / ${q.p99_ms.toFixed(3)}`);
    // A lockstep world's clock is simulated time: an age against it says nothing about freshness.
    const lockstep = (this.manifest?.time_models ?? [])[0] === 'lockstep';
    const stale = (q) => (lockstep ? 'n/a (lockstep)' : fmt(q));
    const rows = Object.entries(r.channels).map(([ch, c]) =>
      el(
        'tr',
        {},
        el('td', {}, ch),
        el('td', { class: 'forward' }, fmt(c.forward)),
        el('td', {}, stale(c.staleness)),
        el('td', {}, String(c.frames.forwarded ?? 0)),
        el(
          'td',
          {
            title: Object.entries(c.frames)
              .map(([k, n]) => `${k}: ${n}`)
              .join(', '),
          },
          String(c.not_forwarded),
        ),
      ),
    );
    const table = el(
      'table',
      {},
      el(
        'tr',
        {},
        el('th', {}, 'channel'),
        el('th', {}, 'forward p50/p99 ms'),
        el('th', {}, 'staleness p50/p99 ms'),
        el('th', {}, 'forwarded'),
        el('th', {}, 'not forwarded'),
      ),
      ...rows,
    );
    const sessions =
      Object.entries(r.sessions)
        .map(([k, n]) => `${k}: ${n}`)
        .join(' · ') || 'none';
    this.statsBox.replaceChildren(table, el('p', { class: 'sessions' }, `sessions ${sessions}`));
    this.model.stats = r;
  }

  draw() {
    for (const v of this.views.values()) v.draw();
  }
}

async function fetchStats() {
  const r = await fetch('stats.json', { cache: 'no-store' });
  if (!r.ok) throw new Error(`stats.json: HTTP ${r.status}`);
  return r.json();
}

async function start(token) {
  $('#login').hidden = true;
  $('#forget').hidden = false;
  const views = new Map();
  const refresh = async () => {
    try {
      const doc = await fetchStats();
      for (const r of doc.routes) {
        if (!views.has(r.name)) views.set(r.name, new RouteView(r, token, $('#routes')));
        views.get(r.name).showStats(r);
      }
      state.statsUpdates++;
      $('#edge').textContent =
        `edge figures over the last ${doc.window_s} s, at ${doc.generated_at.slice(11, 19)} UTC`;
    } catch (err) {
      $('#edge').textContent = `edge unreachable (${err.message}); retrying`;
    }
  };
  await refresh();
  setInterval(refresh, 1000);
  const frame = () => {
    for (const v of views.values()) v.draw();
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}

$('#login').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const token = $('#token').value.trim();
  if (token === '') return;
  sessionStorage.setItem(TOKEN_KEY, token);
  $('#token').value = '';
  void start(token);
});
$('#forget').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  location.reload();
});

const token = takeToken();
if (token !== null) void start(token);
state.started = performance.now();
