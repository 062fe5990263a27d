/**
 * A session.resume names a session of another route. The token is the agent's, so this may be the agent's
 * mistake or an attack. An agent allowed only on one route must not reach another route's sessions. The
 * session is unknown here: nothing is claimed, so its replica keeps its fence. Above all, its world's own
 * token never reaches this route's world.
 */
import { describe, expect, it } from 'vitest';
import { agentOn, pingOk, rigPerTest, sessionOn, until } from './support.js';
import { WORLD_TOKEN } from './world.js';

const { cleanups, start } = rigPerTest();

describe('session.resume on another route', () => {
  it("AWP-SES-008 a session of route /w resumed through /other is unknown there; /other's world never sees /w's token, and the session still resumes on /w", async () => {
    const r = await start();
    const { agent, ready } = await sessionOn(r.edge, '/w');
    const token = ready.session_token as string;
    agent.close();
    await until(() => r.world.control.every((c) => c.closed), 5000, 'the world to see the agent leave');

    const elsewhere = await agentOn(r.edge, '/other');
    cleanups.push(() => elsewhere.close());
    const seen = r.other.allTexts().length;
    const refused = await elsewhere.call('session.resume', { session_token: token, last_status_seq: 0 });
    expect(refused.error).toMatchObject({ code: 2005 }); // AWP_SESSION_UNKNOWN
    await pingOk(elsewhere);
    const toOther = r.other.allTexts().slice(seen);
    expect(toOther.some((t) => t.includes('session.resume'))).toBe(false);
    expect(toOther.some((t) => t.includes(WORLD_TOKEN))).toBe(false);

    // Unclaimed: it resumes on its own route as before.
    const back = await agentOn(r.edge, '/w');
    cleanups.push(() => back.close());
    const resumed = await back.ok('session.resume', { session_token: token, last_status_seq: 0 });
    expect(resumed.session_id).toBe(ready.session_id);
    await pingOk(back);
  }, 30_000);
});
