// Layering rules for src/ (issue 11), checked by `npm run lint:arch`.
//
// The layers, lowest first. A folder may import its own files and the folders it lists, nothing else: an
// import that points up or sideways (to a peer of the same layer) is a violation.
//
//   protocol                  wire formats; no I/O
//   telemetry, transport      utility layers: logs and metrics; sockets. Import protocol only.
//   session                   what relay and observer sessions (and the store) share: journal, records, store
//                             interface, stream endpoints, tokens. Imports protocol only; no I/O.
//   policy                    admission, pacing, budgets: gates a session owns (relay and fanout use them)
//   relay, fanout, store      the session kinds and their persistence; peers, so none imports another
//   recorder                  the flight recorder (AWP audit-log records): a sans-IO core (recorder/*.ts)
//                             and its file writer (recorder/io/); a peer of relay and fanout, which it
//                             does not import: the edge hooks it where it carries out their effects
//   config                    reads edge.yaml into the domain's types (policy's BudgetConfig); used by edge, cli
//   viewer                    the observer viewer site the edge serves (static files, stats from telemetry)
//   edge                      composition
//   cli                       the command
//   demo                      stands apart: a world implementation that speaks the protocol and nothing else;
//                             only the cli (`awp-edge demo`) imports it.
//
// Type-only imports count: a type that points up is still a dependency that points up.

const IO_MODULES = [
  'fs',
  'fs/promises',
  'net',
  'http',
  'https',
  'http2',
  'tls',
  'dgram',
  'dns',
  'child_process',
  'cluster',
  'worker_threads',
  'readline',
];
const IO_PACKAGES = [
  'ws',
  'uWebSockets.js',
  'ioredis',
  '@fails-components/webtransport',
  'pino',
  'prom-client',
];
const IO_PATH = `^(node:)?(${IO_MODULES.join('|')})$|^(node_modules/)?(${IO_PACKAGES.join('|').replace(/\./g, '\\.')})(/|$)`;

/** Each layer and the folders (besides itself) it may import. */
const LAYERS = {
  protocol: [],
  telemetry: ['protocol'],
  transport: ['protocol'],
  session: ['protocol'],
  policy: ['protocol', 'session'],
  relay: ['protocol', 'session', 'policy', 'telemetry', 'transport'],
  fanout: ['protocol', 'session', 'policy', 'telemetry', 'transport'],
  store: ['protocol', 'session', 'telemetry'],
  recorder: ['protocol'],
  config: ['protocol', 'session', 'policy', 'telemetry', 'transport'],
  viewer: ['protocol', 'telemetry', 'transport'],
  edge: [
    'protocol',
    'session',
    'policy',
    'relay',
    'fanout',
    'store',
    'recorder',
    'config',
    'viewer',
    'telemetry',
    'transport',
  ],
  cli: [
    'protocol',
    'session',
    'policy',
    'relay',
    'fanout',
    'store',
    'recorder',
    'config',
    'telemetry',
    'transport',
    'edge',
    'demo',
  ],
  demo: ['protocol'],
};

const layerRules = Object.entries(LAYERS).map(([layer, allowed]) => ({
  name: `layer-${layer}`,
  severity: 'error',
  comment: `src/${layer}/ may import only ${allowed.length > 0 ? allowed.join(', ') : 'its own files'} (see the layer list at the top of this file)`,
  from: { path: `^src/${layer}/` },
  to: { path: '^src/', pathNot: `^src/(${[layer, ...allowed].join('|')})/` },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycle, within a folder or across folders.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...layerRules,
    {
      name: 'sans-io-core',
      severity: 'error',
      comment: 'protocol and session are sans-IO: no sockets, files, Redis, logs or metrics.',
      from: { path: '^src/(protocol|session)/' },
      to: { path: IO_PATH },
    },
    {
      name: 'sans-io-recorder',
      severity: 'error',
      comment: "The recorder's core (src/recorder/*.ts) is sans-IO: files are written by recorder/io/.",
      from: { path: '^src/recorder/[^/]+$' },
      to: { path: IO_PATH },
    },
    {
      name: 'every-file-in-a-layer',
      severity: 'error',
      comment:
        'A source file outside the layer folders would escape the rules above: add its folder to LAYERS.',
      from: { path: '^src/', pathNot: `^src/(${Object.keys(LAYERS).join('|')})/` },
      to: {},
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to nothing.',
      from: { path: '^src/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Count `import type` too (see above).
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
