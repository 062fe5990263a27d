// Runs once before the interop test files: make .venv hold the pinned peers, so that the first
// test file does not spend its timeout on pip.
import { ensurePeers } from './venv.js';

export default async function setup(): Promise<void> {
  const started = performance.now();
  const peers = await ensurePeers({ log: (line) => console.log(`[interop] ${line}`) });
  const versions = ['awp-sim', 'awp-conformance', 'awp-python'].map(
    (n) => `${n} ${peers.versions[n] ?? '?'}`,
  );
  const took = ((performance.now() - started) / 1000).toFixed(1);
  console.log(
    `[interop] peers ready (${versions.join(', ')}) in ${took} s${peers.installed ? ', installed' : ''}`,
  );
}
