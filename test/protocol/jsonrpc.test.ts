import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  errorText,
  invalidResponseText,
  MAX_ID_CHARS,
  notificationText,
  parseMessage,
  requestText,
  resultText,
  sequencedNotification,
  type ParseOutcome,
  type RpcInvalid,
} from '../../src/protocol/jsonrpc.js';
import { awpError } from '../../src/protocol/errors.js';

function expectInvalid(outcome: ParseOutcome): RpcInvalid {
  if (outcome.kind !== 'invalid') throw new Error(`expected invalid, got ${outcome.kind}`);
  return outcome;
}

describe('parseMessage: valid messages', () => {
  it('AWP-CTL-001 tells requests (with id) from notifications (without)', () => {
    const req = parseMessage('{"jsonrpc":"2.0","id":3,"method":"ping","params":{"origin_ns":1000000}}');
    expect(req).toMatchObject({ kind: 'request', id: 3, method: 'ping', params: { origin_ns: 1000000 } });
    const note = parseMessage(
      '{"jsonrpc":"2.0","method":"session.state","params":{"state":"ready","status_seq":1,"ts_mono_ns":0}}',
    );
    expect(note).toMatchObject({ kind: 'notification', method: 'session.state' });
    expect('id' in note).toBe(false);
  });

  it('accepts string ids and an absent params member', () => {
    const req = parseMessage('{"jsonrpc":"2.0","id":"c-7","method":"session.close"}');
    expect(req).toMatchObject({ kind: 'request', id: 'c-7', method: 'session.close', params: undefined });
  });

  it('parses results and errors, including an error with a null id', () => {
    expect(parseMessage('{"jsonrpc":"2.0","id":7,"result":{}}')).toMatchObject({
      kind: 'result',
      id: 7,
      result: {},
    });
    expect(parseMessage('{"jsonrpc":"2.0","id":1,"result":null}')).toMatchObject({
      kind: 'result',
      result: null,
    });
    const err = parseMessage(
      '{"jsonrpc":"2.0","id":11,"error":{"code":2003,"message":"AWP_SESSION_EXPIRED","data":{"retryable":false}}}',
    );
    expect(err).toMatchObject({
      kind: 'error',
      id: 11,
      error: { code: 2003, message: 'AWP_SESSION_EXPIRED', data: { retryable: false } },
    });
    const noId = parseMessage('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
    expect(noId).toMatchObject({ kind: 'error', id: null, error: { code: -32700 } });
  });

  it('keeps the original text and the parsed envelope with unknown members (AWP-VER-003)', () => {
    const text =
      '{ "jsonrpc": "2.0", "method": "world.event", "params": {"event":"x-acme.ping"}, "x-acme.hop": 2 }';
    const msg = parseMessage(text);
    if (msg.kind === 'invalid') throw new Error('expected a message');
    expect(msg.text).toBe(text);
    expect(msg.raw['x-acme.hop']).toBe(2);
  });
});

describe('parseMessage: invalid texts', () => {
  it('answers text that is not JSON with -32700 and a null id', () => {
    const out = expectInvalid(parseMessage('{"jsonrpc":"2.0","id":1,"method":'));
    expect(out.error.code).toBe(-32700);
    expect(out.error.message).toBe('Parse error');
    expect(out.id).toBeNull();
  });

  it('AWP-CTL-006 answers a batch array with -32600, empty or not', () => {
    for (const text of ['[{"jsonrpc":"2.0","id":1,"method":"ping","params":{"origin_ns":1}}]', '[]']) {
      const out = expectInvalid(parseMessage(text));
      expect(out.error.code).toBe(-32600);
      expect(out.error.message).toBe('Invalid Request');
      expect(out.error.data?.detail).toContain('AWP-CTL-006');
      expect(out.id).toBeNull();
    }
  });

  it('answers a non-object message with -32600', () => {
    for (const text of ['42', '"ping"', 'null', 'true'])
      expect(expectInvalid(parseMessage(text)).error.code).toBe(-32600);
  });

  it('answers a wrong or missing jsonrpc version with -32600, keeping a recoverable id', () => {
    const v1 = expectInvalid(parseMessage('{"jsonrpc":"1.0","id":5,"method":"ping"}'));
    expect(v1.error.code).toBe(-32600);
    expect(v1.id).toBe(5);
    const none = expectInvalid(parseMessage('{"id":"q","method":"ping"}'));
    expect(none.id).toBe('q');
  });

  it('answers a bad id type with -32600 and a null id', () => {
    for (const id of ['{"a":1}', '[1]', 'true', 'null']) {
      const out = expectInvalid(
        parseMessage(`{"jsonrpc":"2.0","id":${id},"method":"ping","params":{"origin_ns":1}}`),
      );
      expect(out.error.code).toBe(-32600);
      expect(out.id).toBeNull();
    }
  });

  it('takes string ids up to MAX_ID_CHARS; a longer one is -32600 with a null id, and a response carrying one is broken', () => {
    const longest = 'i'.repeat(MAX_ID_CHARS);
    const request = (id: string) => `{"jsonrpc":"2.0","id":"${id}","method":"ping","params":{"origin_ns":1}}`;
    expect(parseMessage(request(longest))).toMatchObject({ kind: 'request', id: longest });
    const out = expectInvalid(parseMessage(request(`${longest}i`)));
    expect([out.error.code, out.id, out.wasResponse]).toEqual([-32600, null, false]);
    expect(JSON.stringify(out.error.data)).toContain(`at most ${MAX_ID_CHARS} characters`);
    for (const response of [
      `{"jsonrpc":"2.0","id":"${longest}i","result":{}}`,
      `{"jsonrpc":"2.0","id":"${longest}i","error":{"code":1,"message":"x"}}`,
    ])
      expect(expectInvalid(parseMessage(response)).wasResponse).toBe(true);
  });

  it('answers a non-string method, scalar params, or method plus result with -32600', () => {
    const cases = [
      '{"jsonrpc":"2.0","id":1,"method":7}',
      '{"jsonrpc":"2.0","id":2,"method":"ping","params":5}',
      '{"jsonrpc":"2.0","id":3,"method":"ping","params":null}',
      '{"jsonrpc":"2.0","id":4,"method":"ping","result":{}}',
    ];
    cases.forEach((text, i) => {
      const out = expectInvalid(parseMessage(text));
      expect(out.error.code).toBe(-32600);
      expect(out.id).toBe(i + 1);
    });
  });

  it('flags broken responses so a receiver logs rather than answers them', () => {
    const cases = [
      '{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}',
      '{"jsonrpc":"2.0","result":{}}',
      '{"jsonrpc":"2.0","id":1,"error":{"code":"2003","message":"AWP_SESSION_EXPIRED"}}',
      '{"jsonrpc":"2.0","id":1,"error":"boom"}',
    ];
    for (const text of cases) {
      const out = expectInvalid(parseMessage(text));
      expect(out.error.code).toBe(-32600);
      expect(out.wasResponse).toBe(true);
    }
    expect(expectInvalid(parseMessage('{"jsonrpc":"2.0","id":1}')).wasResponse).toBe(false);
  });

  it('builds the answer to an invalid text', () => {
    const out = expectInvalid(parseMessage('[]'));
    expect(JSON.parse(invalidResponseText(out))).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32600, message: 'Invalid Request', data: { detail: out.error.data?.detail } },
    });
  });
});

describe('constructors', () => {
  it('serialise requests, notifications, results and errors that parse back', () => {
    expect(parseMessage(requestText(4, 'world.tick', { expected_tick: 0 }))).toMatchObject({
      kind: 'request',
      id: 4,
      method: 'world.tick',
      params: { expected_tick: 0 },
    });
    expect(requestText('c', 'session.close')).toBe('{"jsonrpc":"2.0","id":"c","method":"session.close"}');
    expect(notificationText('obs.report', { window_ms: 1000 })).toBe(
      '{"jsonrpc":"2.0","method":"obs.report","params":{"window_ms":1000}}',
    );
    expect(notificationText('x-acme.hello')).toBe('{"jsonrpc":"2.0","method":"x-acme.hello"}');
    expect(resultText(7, {})).toBe('{"jsonrpc":"2.0","id":7,"result":{}}');
    const err = errorText(11, awpError('AWP_SESSION_EXPIRED', { detail: 'the session is closing' }));
    expect(parseMessage(err)).toMatchObject({
      kind: 'error',
      id: 11,
      error: {
        code: 2003,
        message: 'AWP_SESSION_EXPIRED',
        data: { retryable: false, detail: 'the session is closing' },
      },
    });
    expect(errorText(null, { code: -32700, message: 'Parse error' })).toBe(
      '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
    );
  });
});

describe('sequencedNotification (AWP-EVT-001: each session its own status_seq)', () => {
  it("is the notification's text with the session's status_seq in place of the world's", () => {
    const event = sequencedNotification('world.event', {
      event: 'e_stop_engaged',
      status_seq: 41,
      ts_mono_ns: 5,
    });
    expect(event(7)).toBe(
      '{"jsonrpc":"2.0","method":"world.event","params":{"event":"e_stop_engaged","ts_mono_ns":5,"status_seq":7}}',
    );
    expect(sequencedNotification('world.event', {})(1)).toBe(
      '{"jsonrpc":"2.0","method":"world.event","params":{"status_seq":1}}',
    );
  });

  it('parses back to the params with status_seq replaced, for any JSON params', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), fc.nat(), (params, seq) => {
        const msg = parseMessage(sequencedNotification('world.event', params)(seq), 1000);
        expect(msg.kind).toBe('notification');
        if (msg.kind !== 'notification') return;
        const expected = JSON.parse(JSON.stringify({ ...params, status_seq: seq })) as unknown;
        expect(msg.params).toEqual(expected);
      }),
    );
  });
});
