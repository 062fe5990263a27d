/**
 * Reading the Grafana dashboards under grafana/: their structure (what Grafana needs to import them),
 * every panel query, template variables, and the metric names a PromQL expression refers to.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const GRAFANA_DIR = join(import.meta.dirname, '..', '..', 'grafana');
export const DASHBOARD_DIR = join(GRAFANA_DIR, 'dashboards');

/** The data source reference every panel and query variable uses (the `datasource` variable). */
export const DATASOURCE_REF = { type: 'prometheus', uid: '${datasource}' } as const;

interface GridPos {
  h: number;
  w: number;
  x: number;
  y: number;
}

export interface Target {
  refId: string;
  expr: string;
  legendFormat?: string;
  datasource?: unknown;
}

export interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: GridPos;
  datasource?: unknown;
  targets?: Target[];
  fieldConfig?: { defaults?: { unit?: string } };
  panels?: Panel[];
}

export interface Variable {
  name: string;
  type: string;
  query?: unknown;
  datasource?: unknown;
}

export interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  tags?: string[];
  templating: { list: Variable[] };
  panels: Panel[];
}

export interface Query {
  readonly dashboard: string;
  readonly panel: string;
  readonly refId: string;
  readonly expr: string;
}

export function loadDashboards(): { file: string; dashboard: Dashboard }[] {
  return readdirSync(DASHBOARD_DIR)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((file) => ({
      file,
      dashboard: JSON.parse(readFileSync(join(DASHBOARD_DIR, file), 'utf8')) as Dashboard,
    }));
}

/** Every panel, rows' nested panels included. */
export function allPanels(d: Dashboard): Panel[] {
  return d.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** Every query of every panel of a dashboard. */
export function queriesOf(d: Dashboard): Query[] {
  return allPanels(d).flatMap((p) =>
    (p.targets ?? []).map((t) => ({ dashboard: d.uid, panel: p.title, refId: t.refId, expr: t.expr })),
  );
}

/** Panel types these dashboards use; all ship with Grafana. */
const PANEL_TYPES = new Set(['row', 'timeseries', 'stat', 'heatmap']);
/** Grafana unit ids: seconds, operations and requests per second, bytes, bytes per second, ratios, counts. */
const UNITS = new Set(['s', 'ops', 'reqps', 'bytes', 'binBps', 'percentunit', 'short', 'none']);
/** Variables Grafana defines itself. */
const BUILTIN_VARS = new Set(['__rate_interval', '__interval', '__range']);

/**
 * What Grafana needs to import a dashboard and draw it: problems found, empty when none. Also checks
 * this project's conventions: every query goes through the `datasource` variable, every template
 * variable in a label matcher is a regex match (so "All" = `.*` works), units are set.
 */
export function dashboardProblems(d: Dashboard): string[] {
  const out: string[] = [];
  const where = (p: Panel) => `${d.uid} panel ${p.id} "${p.title}"`;
  if (typeof d.uid !== 'string' || !/^[A-Za-z0-9_-]{1,40}$/.test(d.uid))
    out.push(`uid ${JSON.stringify(d.uid)} is not a Grafana uid`);
  if (typeof d.title !== 'string' || d.title === '') out.push(`${d.uid}: no title`);
  if (!Number.isInteger(d.schemaVersion) || d.schemaVersion < 36)
    out.push(`${d.uid}: schemaVersion ${d.schemaVersion}`);
  if (!(d.tags ?? []).includes('awp-edge'))
    out.push(`${d.uid}: not tagged awp-edge (the dashboard links use the tag)`);
  const vars = d.templating.list;
  const ds = vars.find((v) => v.name === 'datasource');
  if (ds?.type !== 'datasource' || ds.query !== 'prometheus')
    out.push(`${d.uid}: no Prometheus "datasource" variable`);
  const names = new Set(vars.map((v) => v.name));
  for (const v of vars) {
    if (v.type !== 'query') continue;
    if (!sameRef(v.datasource)) out.push(`${d.uid} variable ${v.name}: datasource is not \${datasource}`);
    if (typeof v.query !== 'string' || !/^label_values\(/.test(v.query))
      out.push(`${d.uid} variable ${v.name}: not a label_values query`);
  }
  const ids = new Set<number>();
  const cells: { p: Panel; g: GridPos }[] = [];
  for (const p of allPanels(d)) {
    if (ids.has(p.id)) out.push(`${where(p)}: duplicate id`);
    ids.add(p.id);
    if (!PANEL_TYPES.has(p.type)) out.push(`${where(p)}: type ${p.type}`);
    const g = p.gridPos;
    if (
      ![g.h, g.w, g.x, g.y].every((n) => Number.isInteger(n) && n >= 0) ||
      g.w < 1 ||
      g.h < 1 ||
      g.x + g.w > 24
    ) {
      out.push(`${where(p)}: gridPos ${JSON.stringify(g)}`);
    }
    for (const c of cells) if (overlap(c.g, g)) out.push(`${where(p)} overlaps panel ${c.p.id}`);
    cells.push({ p, g });
    if (p.type === 'row') continue;
    if (!sameRef(p.datasource)) out.push(`${where(p)}: datasource is not \${datasource}`);
    const unit = p.fieldConfig?.defaults?.unit;
    if (p.type !== 'heatmap' && (unit === undefined || !UNITS.has(unit)))
      out.push(`${where(p)}: unit ${String(unit)}`);
    const targets = p.targets ?? [];
    if (targets.length === 0) out.push(`${where(p)}: no targets`);
    const refs = new Set<string>();
    for (const t of targets) {
      if (refs.has(t.refId)) out.push(`${where(p)}: duplicate refId ${t.refId}`);
      refs.add(t.refId);
      if (typeof t.expr !== 'string' || t.expr.trim() === '') out.push(`${where(p)} ${t.refId}: no expr`);
      if (!sameRef(t.datasource)) out.push(`${where(p)} ${t.refId}: datasource is not \${datasource}`);
      for (const v of variablesIn(t.expr)) {
        if (!names.has(v) && !BUILTIN_VARS.has(v))
          out.push(`${where(p)} ${t.refId}: undefined variable $${v}`);
      }
      // `label="$var"` would not match "All" (`.*`) nor multi-value selections.
      const exact = /[A-Za-z_]\w*\s*!?=\s*"[^"]*\$/.exec(t.expr);
      if (exact !== null) out.push(`${where(p)} ${t.refId}: variable in an exact matcher: ${exact[0]}`);
    }
  }
  return out;
}

function sameRef(ref: unknown): boolean {
  const r = ref as { type?: unknown; uid?: unknown } | undefined;
  return r?.type === DATASOURCE_REF.type && r.uid === DATASOURCE_REF.uid;
}

function overlap(a: GridPos, b: GridPos): boolean {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

const VARIABLE = /\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)/g;

export function variablesIn(expr: string): string[] {
  return [...expr.matchAll(VARIABLE)].map((m) => (m[1] ?? m[2] ?? m[3])!);
}

/** Replaces Grafana variables with values; throws on a variable without one. */
export function substitute(expr: string, values: Readonly<Record<string, string>>): string {
  return expr.replace(VARIABLE, (_m, a?: string, b?: string, c?: string) => {
    const name = (a ?? b ?? c)!;
    const v = values[name];
    if (v === undefined) throw new Error(`no value for $${name} in ${expr}`);
    return v;
  });
}

/** PromQL words that are not metric names when not followed by `(`. */
const KEYWORDS = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
  'inf',
  'nan',
]);

/**
 * Metric names a PromQL expression selects: identifiers outside strings, label matchers, ranges and
 * grouping clauses that are not function calls or keywords.
 */
export function metricNames(expr: string): string[] {
  const s = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const m of s.matchAll(/(?<![\w.])[A-Za-z_:][\w:]*/g)) {
    const word = m[0];
    if (
      s
        .slice(m.index + word.length)
        .trimStart()
        .startsWith('(')
    )
      continue;
    if (KEYWORDS.has(word.toLowerCase())) continue;
    names.add(word);
  }
  return [...names];
}

/** Sample names in a Prometheus text exposition (`X_bucket`, `X_sum`, `X_count` for histograms). */
export function exposedSampleNames(exposition: string): Set<string> {
  const out = new Set<string>();
  for (const line of exposition.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^[A-Za-z_:][\w:]*/.exec(line);
    if (m !== null) out.add(m[0]);
  }
  return out;
}
