// awp-python agents against awp-sim: a relay episode (act, drop, resume, act, close) and several
// observer sessions, one of them resuming. Today directly; later also through the edge.
// INTEROP_PASSTHROUGH=1 adds a plain TCP forwarder as a second target.
import { defineScenarioMatrix } from './matrix.js';
import { tcpPassthrough } from './passthrough.js';
import { edge } from './edge-target.js';
import { direct } from './targets.js';

const extra = process.env['INTEROP_PASSTHROUGH'] === '1' ? [tcpPassthrough] : [];

defineScenarioMatrix({ targets: [direct, edge, ...extra] });
