/**
 * The spec's wire traces played through the edge: the agent's transcript must equal the direct run's,
 * tokens and endpoint URLs aside, and the world must receive exactly what the agent sent.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  TRACE_NAMES,
  buildPlayScript,
  messagesFrom,
  normaliseIllustrative,
  playTrace,
} from '../harness/index.js';
import { AGENT_TOKEN, startEdge, type TestEdge } from '../support/edge.js';

let edge: TestEdge | undefined;
afterEach(async () => {
  await edge?.close();
  edge = undefined;
});

describe('wire traces through the edge', () => {
  for (const name of TRACE_NAMES) {
    it(`${name} replays through the edge with the direct transcript`, async () => {
      const script = buildPlayScript(name);
      const direct = await playTrace(script);
      const through = await playTrace(script, {
        credential: AGENT_TOKEN,
        normalise: normaliseIllustrative,
        // The traces' arm grants max_action_rate_hz 10 and the edge enforces it (AWP-ENV-004): pace
        // submissions as a real agent would; the trace's own timestamps are further apart still.
        beforeAgentStep: async (entry) => {
          if (entry.msg.method === 'action.submit') await new Promise((r) => setTimeout(r, 110));
        },
        agentUrl: async (worldUrl) => {
          edge ??= await startEdge([{ path: '/', upstream: worldUrl }]);
          return edge.url();
        },
      });
      const norm = (xs: unknown[]) => xs.map((m) => normaliseIllustrative(m as never));
      expect(norm(through.agentTranscript)).toEqual(norm(direct.agentTranscript));
      expect(norm(through.worldTranscript)).toEqual(norm(messagesFrom(script.entries, 'agent')));
      // The agent holds the edge's token; the world's never leaves the edge (AWP-SEC-003).
      const worldTokens = messagesFrom(script.entries, 'world')
        .map((m) => (m.result as { session_token?: unknown } | undefined)?.session_token)
        .filter((t): t is string => typeof t === 'string');
      expect(worldTokens.length).toBeGreaterThan(0);
      const seenByAgent = JSON.stringify(through.agentTranscript);
      for (const t of worldTokens) expect(seenByAgent).not.toContain(t);
      expect(through.agentConnections.every((c) => c.url.startsWith(edge!.url()))).toBe(true);
    });
  }
});
