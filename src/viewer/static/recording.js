/* global window, document, crypto, TextEncoder */
/**
 * A flight-recorder file (the edge's `record:`, AWP audit-log JSON Lines) opened in the page and stepped
 * through, one record at a time: when it was written, who sent what to whom, and the record itself. The
 * file is read by the browser and goes nowhere (no credential is needed: the page does not connect for
 * it). The hash chain is checked too (AWP-AUD-003), where the browser offers SHA-256 (https or localhost).
 */
const ARROWS = {
  agent: 'agent → edge',
  world: 'world → edge',
  edge_to_agent: 'edge → agent',
  edge_to_world: 'edge → world',
  edge: 'edge',
};

const el = (tag, attrs = {}, ...children) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
};

const shown = (v) => (typeof v === 'string' ? v : v === undefined ? '?' : JSON.stringify(v));
const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One line saying what a record is (as `awp-edge recordings show` does). */
function summary(r, channels) {
  const b = r.body;
  const name = (id) => channels.get(id) ?? `channel ${shown(id)}`;
  switch (r.kind) {
    case 'header':
      return `header: ${shown(r.class)}, ${shown(b.session_kind)} session ${shown(b.session_id)}, route ${shown(b.route)}, segment ${shown(b.segment)}`;
    case 'frame':
      return `${shown(b.method)} ${name(b.channel_id)} seq ${shown(b.seq)}, sha256:${shown(b.payload_sha256).slice(0, 12)}`;
    case 'frames': {
      const frames = Array.isArray(b.frames) ? b.frames : [];
      const count = new Map();
      for (const f of frames) count.set(name(f.channel_id), (count.get(name(f.channel_id)) ?? 0) + 1);
      return `frames: ${[...count].map(([c, n]) => `${c} ×${n}`).join(', ')}`;
    }
    case 'frame_refs':
      return `frames: ${shown(b.frames)} by reference to ${shown(b.hub_file)} (${shown(b.binding)})`;
    case 'dropped':
      return `${shown(b.records)} records dropped here: the write queue was full`;
    case 'rotated':
      return `continues in ${shown(b.next)}`;
    case 'end':
      return `end: ${shown(b.reason)}`;
    case 'message': {
      if (b.unparsed !== undefined) return `not JSON-RPC: ${shown(b.unparsed)}, ${shown(b.bytes)} bytes`;
      const id = b.id !== undefined ? ` #${JSON.stringify(b.id)}` : '';
      if (typeof b.method === 'string') return `${b.method}${id}`;
      if (isObject(b.error)) return `error${id} ${shown(b.error.code)} ${shown(b.error.message)}`;
      return `result${id}`;
    }
    default:
      return shown(b.event ?? r.kind);
  }
}

async function sha256Hex(text) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((x) => x.toString(16).padStart(2, '0')).join('');
}

/** `ok`, `broken at line N`, or why it was not checked. */
async function chainOf(lines, records) {
  if (crypto.subtle === undefined) return 'not checked: SHA-256 needs https or localhost';
  if (records.length !== lines.length) return `not a recording: line ${records.length + 1} is no record`;
  let prev = null;
  for (let i = 0; i < lines.length; i++) {
    if (records[i].prev_hash !== prev) return `broken at line ${i + 1}`;
    prev = await sha256Hex(lines[i]);
  }
  return 'ok';
}

export class RecordingView {
  constructor(root) {
    this.records = [];
    this.channels = [];
    this.index = 0;
    /** What the tests read (nothing secret: the records are already redacted). */
    this.state = { records: 0, index: 0, chain: 'none', file: '' };
    window.awpRecording = this.state;
    const input = el('input', { id: 'recording-file', type: 'file', accept: '.jsonl,.json,text/plain' });
    input.addEventListener('change', () => {
      const file = input.files?.[0];
      if (file !== undefined) void this.open(file);
    });
    this.info = el('p', { class: 'recording-info' });
    this.position = el('input', { id: 'recording-position', type: 'range', min: '0', max: '0', value: '0' });
    this.position.addEventListener('input', () => this.show(Number(this.position.value)));
    const button = (id, label, to) => {
      const b = el('button', { id, type: 'button' }, label);
      b.addEventListener('click', () => this.show(to()));
      return b;
    };
    this.controls = el(
      'div',
      { class: 'recording-controls', hidden: '' },
      button('recording-first', '⏮', () => 0),
      button('recording-prev', '◀', () => this.index - 1),
      button('recording-next', '▶', () => this.index + 1),
      button('recording-last', '⏭', () => this.records.length - 1),
      this.position,
    );
    this.line = el('p', { id: 'recording-line', class: 'recording-line' });
    this.body = el('pre', { id: 'recording-record', class: 'recording-record' });
    root.append(
      el('h2', {}, 'Open a recording'),
      el(
        'p',
        {},
        'A flight-recorder file (the edge’s record: setting; one record per line). It is read by this page only.',
      ),
      input,
      this.info,
      this.controls,
      this.line,
      this.body,
    );
    root.addEventListener('keydown', (e) => {
      if (e.key === 'ArrowRight') this.show(this.index + 1);
      else if (e.key === 'ArrowLeft') this.show(this.index - 1);
    });
  }

  async open(file) {
    const text = await file.text();
    const lines = text.split('\n').filter((l) => l !== '');
    const records = [];
    for (const l of lines) {
      try {
        const r = JSON.parse(l);
        if (!isObject(r) || !isObject(r.body) || typeof r.kind !== 'string') break;
        records.push(r);
      } catch {
        break;
      }
    }
    this.records = records;
    // Channel names as known at each record (grants arrive in session.ready and subscribe results).
    const names = new Map();
    this.channels = records.map((r) => {
      const g = r.body?.result?.granted;
      const list = Array.isArray(g) ? g : Array.isArray(g?.channels) ? g.channels : [];
      for (const c of list) if (typeof c.channel_id === 'number') names.set(c.channel_id, c.channel);
      return new Map(names);
    });
    Object.assign(this.state, { records: records.length, file: file.name, chain: 'checking' });
    this.info.textContent = `${file.name}: ${records.length} records; hash chain: checking…`;
    this.controls.hidden = records.length === 0;
    this.position.max = String(Math.max(0, records.length - 1));
    this.show(0);
    const chain = await chainOf(lines, records);
    this.state.chain = chain;
    this.info.textContent = `${file.name}: ${records.length} records; hash chain: ${chain}`;
  }

  show(i) {
    if (this.records.length === 0) return;
    this.index = Math.min(Math.max(0, i), this.records.length - 1);
    const r = this.records[this.index];
    this.state.index = this.index;
    this.position.value = String(this.index);
    const ms = (Number(r.ts_mono_ns) / 1e6).toFixed(3);
    const who = ARROWS[r.direction] ?? shown(r.direction);
    this.line.textContent = `${this.index + 1} / ${this.records.length}   ${ms} ms   ${who}   ${summary(r, this.channels[this.index])}`;
    this.body.textContent = JSON.stringify(r, null, 2);
  }
}

const root = document.querySelector('#recording');
if (root !== null) new RecordingView(root);
