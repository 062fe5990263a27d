/**
 * Properties of the fan-out cores (hub upstream session, observer sessions, subscribers) under arbitrary
 * interleavings of a model world, hostile world messages and hostile observers (see fanout-model.ts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { params } from './arbitraries.js';
import { fanoutScenarioArb, runFanout, type FanoutStep, type FanoutViolation } from './fanout-model.js';

const RUNS = 300;

/** Shrunk counterexamples the properties found, checked first on every run. */
const PREFIX: FanoutStep[] = [
  { s: 'open', params: null },
  { s: 'hubConnected' },
  { s: 'worldAnswer', pick: 0, hostile: null },
  { s: 'worldAnswer', pick: 0, hostile: null },
  { s: 'worldAnswer', pick: 0, hostile: null },
];
const KNOWN: FanoutStep[][] = [
  // obs.unsubscribe naming an object whose toString is not a function: String() threw (observer-session).
  [
    ...PREFIX,
    {
      s: 'observer',
      which: 0,
      m: { t: 'unsubscribe', id: 1, channels: [JSON.parse('{"toString":false}') as unknown] },
    },
  ],
  // A subscribe entry that is not an object: reading its channel threw (observer-session).
  [...PREFIX, { s: 'observer', which: 0, m: { t: 'subscribe', id: 1, channels: [null] } }],
  // The world answering the hub's session.resume with `result: null`: reading session_token threw (hub-upstream).
  [
    ...PREFIX,
    { s: 'hubLost' },
    { s: 'hubConnected' },
    { s: 'worldAnswer', pick: 0, hostile: { result: null } },
    { s: 'worldAnswer', pick: 0, hostile: { result: null } },
  ],
  // session.state closed with a reason whose toString is not a function (hub-upstream).
  [
    ...PREFIX,
    {
      s: 'worldText',
      text: '{"jsonrpc":"2.0","method":"session.state","params":{"state":"closed","status_seq":1,"reason":{"toString":1}}}',
    },
  ],
  // An observer ping acknowledging -5: accepted silently (issue 12: -32602).
  [...PREFIX, { s: 'observer', which: 0, m: { t: 'ping', id: 1, ack: -5 } }],
];

function holds(classes: readonly FanoutViolation[], runs = RUNS): void {
  fc.assert(
    fc.property(fanoutScenarioArb(), (steps: FanoutStep[]) => {
      const hit = runFanout(steps).violations.find((v) => classes.includes(v.cls));
      if (hit !== undefined) throw new Error(`${hit.cls}: ${hit.detail}`);
    }),
    {
      ...params(runs), // FC_NO_EXAMPLES=1 hunts for new counterexamples past the known ones.
      examples: process.env.FC_NO_EXAMPLES ? [] : KNOWN.map((k) => [k] as [FanoutStep[]]),
    },
  );
}

describe('fan-out properties', () => {
  it('no exception escapes the hub upstream session, observer sessions or subscribers', () => {
    holds(['exception']);
  });

  it('AWP-SEC-003 no hub world token or world URL in anything observer-bound', () => {
    holds(['leak']);
  });

  it('AWP-CTL-008 observer status_seq strictly increasing per connection; after a resume every seq once', () => {
    holds(['seq-order', 'seq-gap', 'seq-duplicate']);
  });

  it('issue 12 (5, 7) an observer ping with an invalid last_status_seq is answered -32602', () => {
    holds(['invalid-count-accepted']);
  });

  it('AWP-DAT-001 frame seq strictly increasing per channel for an observer, inline or on its stream, across resumes', () => {
    holds(['frame-order']);
  });

  it('the hub forwards each world event once, in status_seq order, and sends only JSON-RPC upstream', () => {
    holds(['hub-event-order', 'hub-invalid-send']);
  });

  it("the hub's channel index is rebuilt whenever an observer's channels change (and only told then)", () => {
    holds(['stale-index']);
  });

  it('the model itself: the prefix opens an observer that sees events, frames and a resume', () => {
    const steps: FanoutStep[] = [
      { s: 'open', params: null },
      { s: 'hubConnected' },
      { s: 'worldAnswer', pick: 0, hostile: null },
      { s: 'worldAnswer', pick: 0, hostile: null },
      { s: 'worldAnswer', pick: 0, hostile: null },
      { s: 'worldEvent', params: null },
      { s: 'worldFrame', channel_id: 1, keyframe: true, hostile: null },
      { s: 'drop', which: 0 },
      { s: 'worldEvent', params: null },
      { s: 'resume', which: 0, seq: 'honest' },
    ];
    const { violations, stats } = runFanout(steps);
    expect(violations).toEqual([]);
    expect(stats).toEqual({ readyObservers: 1, resumed: 1, frames: 1, events: 2, framesSeen: 1 });
  });
});
