// The edge in front of the world: the suite and the awp-python agents dial the edge, which relays to
// awp-sim with its own upstream credential (the world's agent token), passes the deployment's approver
// credential through for approver connections, and serves observer sessions from its hub.
import { createWriteStream } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { createLogger } from '../../src/telemetry/logger.js';
import { startEdge } from '../support/edge.js';
import type { TargetFactory } from './targets.js';

export const edge: TargetFactory = {
  name: 'edge',
  async open(world, dir) {
    const token = randomBytes(18).toString('base64url');
    const logFile = createWriteStream(join(dir, 'edge.log'));
    const running = await startEdge(
      [
        {
          path: '/',
          upstream: world.url,
          upstream_token: world.token,
          ...(world.approverToken !== undefined ? { approvers: { tokens: [world.approverToken] } } : {}),
        },
      ],
      {
        agents: { tokens: [token] },
        log_level: 'debug',
        budgets: { max_connections: 1000, max_sessions: 1000, max_messages_per_second: 100_000 },
      },
      { log: createLogger('debug', logFile) },
    );
    return {
      name: 'edge',
      url: running.url('/'),
      token,
      close: async () => {
        await running.close();
        logFile.end();
      },
    };
  },
};
