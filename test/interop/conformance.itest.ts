// The conformance suite against awp-sim, for both time models, Core and every optional feature the
// suite tests. Today the only default target is the world itself (the baseline); the through-edge
// variant adds its TargetFactory to `targets` and then asserts equality with the baseline per
// requirement. INTEROP_PASSTHROUGH=1 adds a plain TCP forwarder to exercise that path.
import { defineConformanceMatrix } from './matrix.js';
import { tcpPassthrough } from './passthrough.js';
import { edge } from './edge-target.js';
import { direct } from './targets.js';

const extra = process.env['INTEROP_PASSTHROUGH'] === '1' ? [tcpPassthrough] : [];

defineConformanceMatrix({ targets: [direct, edge, ...extra] });
