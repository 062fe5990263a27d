/**
 * The WebSocket handshakes a page makes, as Chromium itself saw them (DevTools protocol `Network` events):
 * what the browser offered and what the server answered, headers included. This is how the test sees that
 * the edge selected `awp` and never echoed an `awp.bearer.*` credential, without trusting the page.
 */
import type { Page } from 'playwright-core';

export interface Handshake {
  readonly url: string;
  requestHeaders: Record<string, string>;
  status?: number;
  responseHeaders?: Record<string, string>;
  errorMessage?: string;
}

interface Created {
  requestId: string;
  url: string;
}
interface WillSend {
  requestId: string;
  request: { headers: Record<string, string> };
}
interface ResponseReceived {
  requestId: string;
  response: { status: number; headers: Record<string, string> };
}
interface FrameError {
  requestId: string;
  errorMessage: string;
}

/** Header lookup regardless of case (DevTools reports them as the wire spelled them). */
export function header(headers: Record<string, string> | undefined, name: string): string | undefined {
  if (headers === undefined) return undefined;
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name.toLowerCase());
  return key === undefined ? undefined : headers[key];
}

export async function recordHandshakes(page: Page): Promise<Handshake[]> {
  const cdp = await page.context().newCDPSession(page);
  const byId = new Map<string, Handshake>();
  const list: Handshake[] = [];
  cdp.on('Network.webSocketCreated', (e: Created) => {
    const h: Handshake = { url: e.url, requestHeaders: {} };
    byId.set(e.requestId, h);
    list.push(h);
  });
  cdp.on('Network.webSocketWillSendHandshakeRequest', (e: WillSend) => {
    const h = byId.get(e.requestId);
    if (h !== undefined) h.requestHeaders = e.request.headers;
  });
  cdp.on('Network.webSocketHandshakeResponseReceived', (e: ResponseReceived) => {
    const h = byId.get(e.requestId);
    if (h === undefined) return;
    h.status = e.response.status;
    h.responseHeaders = e.response.headers;
  });
  cdp.on('Network.webSocketFrameError', (e: FrameError) => {
    const h = byId.get(e.requestId);
    if (h !== undefined) h.errorMessage = e.errorMessage;
  });
  await cdp.send('Network.enable');
  return list;
}
