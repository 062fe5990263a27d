/**
 * Issue 13 item 2 (a): the spec's wire traces played by a relay agent through three tiers of edges
 * (scripted world <- C <- B <- A <- scripted agent), as test/edge/traces-through-edge.test.ts plays them
 * through one: the agent's transcript equals the direct run's (tokens and endpoint URLs aside), the world
 * receives exactly what the agent sent, and no tier hands the agent a token of the tier below.
 */
import { describe, expect, it } from 'vitest';
import {
  TRACE_NAMES,
  buildPlayScript,
  messagesFrom,
  normaliseIllustrative,
  playTrace,
} from '../harness/index.js';
import { EDGE_AGENT_TOKEN, useCleanups } from '../scale/rig.js';
import { startTiers, type TierRig } from './rig.js';

describe('wire traces through three tiers of edges (issue 13)', () => {
  const cleanup = useCleanups();

  for (const name of TRACE_NAMES) {
    it(`${name} replays through three edges with the direct transcript`, async () => {
      const script = buildPlayScript(name);
      const direct = await playTrace(script);
      let rig: TierRig | undefined;
      const through = await playTrace(script, {
        credential: EDGE_AGENT_TOKEN,
        normalise: normaliseIllustrative,
        // Three edge processes start on the first connection (tsx compiles each): bound every step
        // generously, the first one waits for them.
        stepTimeoutMs: 30_000,
        connectTimeoutMs: 10_000,
        // The traces' arm grants max_action_rate_hz 10 and every tier enforces it (AWP-ENV-004).
        beforeAgentStep: async (entry) => {
          if (entry.msg.method === 'action.submit') await new Promise((r) => setTimeout(r, 110));
        },
        agentUrl: async (worldUrl) => {
          rig ??= await startTiers(cleanup, worldUrl);
          return rig.leaf.url();
        },
      });
      const norm = (xs: unknown[]) => xs.map((m) => normaliseIllustrative(m as never));
      expect(norm(through.agentTranscript)).toEqual(norm(direct.agentTranscript));
      expect(norm(through.worldTranscript)).toEqual(norm(messagesFrom(script.entries, 'agent')));
      // The world's tokens never leave the central tier, nor any tier's the tier above (AWP-SEC-003).
      const worldTokens = messagesFrom(script.entries, 'world')
        .map((m) => (m.result as { session_token?: unknown } | undefined)?.session_token)
        .filter((t): t is string => typeof t === 'string');
      expect(worldTokens.length).toBeGreaterThan(0);
      const seenByAgent = JSON.stringify(through.agentTranscript);
      for (const t of worldTokens) expect(seenByAgent).not.toContain(t);
      expect(through.agentConnections.every((c) => c.url.startsWith(rig!.leaf.url()))).toBe(true);
      expect(through.worldConnections.length).toBeGreaterThan(0);
    });
  }
});
