/** Small `ws` helpers shared by the scripted world, the scripted agent and the test relay. */
import { WebSocket, type RawData } from 'ws';
import type { Json, JsonObject } from './trace-types.js';
import { isJsonObject } from './trace-types.js';

export const AWP_SUBPROTOCOL = 'awp';

/** Parses one received WebSocket message. Anything that is not a JSON object text message is kept in a
 * recognisable wrapper so a comparison fails visibly instead of the harness throwing. */
export function decodeMessage(data: RawData, isBinary: boolean): JsonObject {
  const buf = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
  if (isBinary) return { $binary_base64: buf.toString('base64') };
  const text = buf.toString('utf8');
  try {
    const value = JSON.parse(text) as Json;
    return isJsonObject(value) ? value : { $non_object: value };
  } catch {
    return { $unparsable_text: text };
  }
}

/** Sends one text message; resolves true once written, false if the socket is not open or the write failed. */
export function sendText(ws: WebSocket, text: string): Promise<boolean> {
  if (ws.readyState !== WebSocket.OPEN) return Promise.resolve(false);
  return new Promise((resolve) => {
    ws.send(text, (err) => resolve(!(err instanceof Error)));
  });
}

/** Terminates a socket (abrupt close, no close handshake) and waits, bounded, for its close event. */
export function terminateAndWait(ws: WebSocket, timeoutMs: number): Promise<void> {
  if (ws.readyState === WebSocket.CLOSED) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    ws.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    ws.terminate();
  });
}
