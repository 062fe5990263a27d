/**
 * Fuzz target: the JSON-RPC envelope parser every control text passes through (src/protocol/jsonrpc.ts), and the
 * integer-range check that runs on each parsed message. The input bytes are the text, decoded as UTF-8 the way a
 * WebSocket text frame is.
 *
 * Crashes: any exception (both are documented never to throw), and answers that are not what the parser
 * promises: an invalid text's error response must itself parse as a JSON-RPC error, and every outcome keeps the
 * text it arrived in (relays forward it byte for byte); no text that parses deeper than the depth limit passes.
 */
import { errorText, invalidResponseText, parseMessage } from '../../../src/protocol/jsonrpc.js';
import { findMessageIntegerRangeViolation } from '../../../src/protocol/integers.js';
import { check } from './check.js';

/** Nesting depth of a parsed JSON value, without recursion (the input is hostile). */
function depthOf(value: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 0]];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [v, d] = top;
    if (typeof v !== 'object' || v === null) continue;
    max = Math.max(max, d + 1);
    for (const child of Object.values(v)) stack.push([child, d + 1]);
  }
  return max;
}

/**
 * Nothing that parses deeper than the limit gets past it (the smallest configurable limit, 8, and the default).
 * The converse does not hold: the limit counts the text's brackets, so a duplicate key can hide a deep value
 * that JSON.parse then drops (refused, and harmless).
 */
function checkDepthLimit(text: string, limit: number): void {
  const outcome = parseMessage(text, limit);
  if (outcome.kind === 'invalid' && outcome.tooDeep === true) return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return;
  }
  const depth = depthOf(parsed);
  check(depth <= limit, `a message nesting ${depth} levels passed the depth limit ${limit}`);
}

export function fuzz(data: Buffer): void {
  const text = data.toString('utf8');
  checkDepthLimit(text, 8);
  checkDepthLimit(text, 64);
  const outcome = parseMessage(text);
  check(outcome.text === text, 'the parsed outcome does not keep the text it arrived in');
  if (outcome.kind === 'invalid') {
    const reply = parseMessage(invalidResponseText(outcome));
    check(reply.kind === 'error', `the answer to an invalid text is a ${reply.kind}, not an error`);
    check(reply.id === outcome.id, 'the answer to an invalid text changed its id');
    return;
  }
  findMessageIntegerRangeViolation(outcome);
  if (outcome.kind === 'request') {
    // What the relay answers a refused request with must be a response to the same id.
    const reply = parseMessage(errorText(outcome.id, { code: -32600, message: 'Invalid Request' }));
    check(reply.kind === 'error' && reply.id === outcome.id, 'an error response lost the request id');
  }
}
