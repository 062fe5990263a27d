// The project's Python virtual environment holding the pinned AWP peers (awp-sim, awp-conformance,
// awp-python). Idempotent: when .venv already holds exactly the pinned versions, this costs one
// short interpreter start.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { capture, runLogged } from './proc.js';
import { PROJECT_ROOT } from './paths.js';

export const VENV_DIR = join(PROJECT_ROOT, '.venv');
export const REQUIREMENTS = join(PROJECT_ROOT, 'test', 'interop', 'requirements.txt');
const MIN_PYTHON: readonly [number, number] = [3, 11];

export interface Peers {
  readonly python: string;
  readonly awpSim: string;
  readonly awpConformance: string;
  /** Installed distribution versions by normalised name. */
  readonly versions: Readonly<Record<string, string>>;
  /** True when this call had to create the venv or run pip. */
  readonly installed: boolean;
}

/** `name==version` lines of the pin file, names normalised as PEP 503 does. */
export function readPins(path = REQUIREMENTS): Map<string, string> {
  const pins = new Map<string, string>();
  for (const raw of readFileSync(path, 'utf8').split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') continue;
    const m = /^([A-Za-z0-9._-]+)==(\S+)$/.exec(line);
    if (m === null) throw new Error(`${path}: not an exact pin: ${line}`);
    pins.set(normalise(m[1]!), m[2]!);
  }
  return pins;
}

function normalise(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, '-');
}

async function pythonVersion(python: string): Promise<[number, number, number] | null> {
  try {
    const r = await capture(
      python,
      ['-c', 'import sys, json; print(json.dumps(list(sys.version_info[:3])))'],
      {
        timeoutMs: 15_000,
      },
    );
    if (r.code !== 0) return null;
    const v = JSON.parse(r.stdout.trim()) as [number, number, number];
    return v;
  } catch {
    return null;
  }
}

function atLeast(v: readonly number[], min: readonly number[]): boolean {
  return v[0]! > min[0]! || (v[0] === min[0] && v[1]! >= min[1]!);
}

async function installedVersions(python: string, names: readonly string[]): Promise<Record<string, string>> {
  const script = [
    'import json, sys, importlib.metadata as m',
    'out = {}',
    'for n in sys.argv[1:]:',
    '    try: out[n] = m.version(n)',
    '    except m.PackageNotFoundError: pass',
    'print(json.dumps(out))',
  ].join('\n');
  const r = await capture(python, ['-c', script, ...names], { timeoutMs: 30_000 });
  if (r.code !== 0) return {};
  return JSON.parse(r.stdout.trim()) as Record<string, string>;
}

function mismatches(pins: Map<string, string>, have: Record<string, string>): string[] {
  return [...pins]
    .filter(([n, v]) => have[n] !== v)
    .map(([n, v]) => `${n}==${v} (have ${have[n] ?? 'none'})`);
}

/**
 * Make .venv hold exactly the pinned peers and return their entry points. The base interpreter is
 * $AWP_INTEROP_PYTHON or `python3`; it must be 3.11 or newer (the peers' Requires-Python).
 */
export async function ensurePeers(opts: { readonly log?: (line: string) => void } = {}): Promise<Peers> {
  const log = opts.log ?? (() => undefined);
  const venvPython = join(VENV_DIR, 'bin', 'python');
  const bin = (name: string): string => join(VENV_DIR, 'bin', name);
  const pins = readPins();
  let installed = false;

  let venvOk = existsSync(venvPython);
  if (venvOk) {
    const v = await pythonVersion(venvPython);
    venvOk = v !== null && atLeast(v, MIN_PYTHON);
  }
  if (!venvOk) {
    const base = process.env['AWP_INTEROP_PYTHON'] ?? 'python3';
    const v = await pythonVersion(base);
    if (v === null || !atLeast(v, MIN_PYTHON)) {
      const found = v === null ? 'no working interpreter' : `Python ${v.join('.')}`;
      throw new Error(
        `test:interop needs Python >= ${MIN_PYTHON.join('.')} with venv and pip; \`${base}\` gave ${found}. ` +
          'Install Python 3.11+ or point AWP_INTEROP_PYTHON at one.',
      );
    }
    log(`creating ${VENV_DIR} with ${base} (Python ${v.join('.')})`);
    const made = await capture(base, ['-m', 'venv', '--clear', VENV_DIR], { timeoutMs: 120_000 });
    if (made.code !== 0) throw new Error(`python -m venv failed: ${made.stderr.trim()}`);
    installed = true;
  }

  let have = await installedVersions(venvPython, [...pins.keys()]);
  let missing = mismatches(pins, have);
  if (missing.length > 0) {
    log(`installing pinned peers: ${missing.join(', ')}`);
    const logPath = join(VENV_DIR, 'interop-pip.log');
    const r = await runLogged(
      venvPython,
      ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '--pre', '-r', REQUIREMENTS],
      { cwd: PROJECT_ROOT, stdoutPath: logPath, stderrPath: logPath, timeoutMs: 600_000 },
    );
    if (r.code !== 0) {
      throw new Error(
        `pip install --pre -r ${REQUIREMENTS} failed (${r.timedOut ? 'timed out' : `exit ${r.code}`}); see ${logPath}`,
      );
    }
    installed = true;
    have = await installedVersions(venvPython, [...pins.keys()]);
    missing = mismatches(pins, have);
    if (missing.length > 0)
      throw new Error(`after pip install, versions still differ: ${missing.join(', ')}`);
  }
  for (const exe of ['awp-sim', 'awp-conformance']) {
    if (!existsSync(bin(exe))) throw new Error(`${bin(exe)} is missing after installing the peers`);
  }
  return {
    python: venvPython,
    awpSim: bin('awp-sim'),
    awpConformance: bin('awp-conformance'),
    versions: have,
    installed,
  };
}
