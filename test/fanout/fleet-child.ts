/**
 * The observer fleet's process (see fleet.ts): opens observers as told, stalls some at the TCP level,
 * and reports what each received. Exits when told to close or when its parent goes away.
 */
import type { FleetReply, FleetRequest, ObserverReport } from './fleet.js';
import { isResyncKeyframe, ObserverClient } from './observer-client.js';

const clients = new Map<number, { client: ObserverClient; stalls: boolean }>();

function reply(m: FleetReply): void {
  process.send?.(m);
}

async function handle(req: FleetRequest): Promise<void> {
  switch (req.type) {
    case 'open': {
      const origin = BigInt(req.origin);
      const sessions: { index: number; session_id: string }[] = [];
      for (let i = 0; i < req.plans.length; i += req.batch) {
        await Promise.all(
          req.plans.slice(i, i + req.batch).map(async (p) => {
            const client = await ObserverClient.open(req.url, {
              kind: p.kind,
              subscribe: p.subscribe,
              credential: req.credential,
              clockOrigin: origin,
              timeoutMs: 15_000,
              ...(req.certHash !== undefined ? { certHash: Buffer.from(req.certHash, 'base64') } : {}),
            });
            if (p.stalls) client.stall();
            clients.set(p.index, { client, stalls: p.stalls });
            sessions.push({ index: p.index, session_id: client.ready!.session_id as string });
          }),
        );
      }
      return reply({ type: 'opened', sessions });
    }
    case 'stall': {
      const stalled = [...clients.values()].filter((c) => c.stalls);
      for (const c of stalled) c.client.stall();
      return reply({ type: 'stalled', count: stalled.length });
    }
    case 'unstall': {
      let reopened = 0;
      const stalled = [...clients.values()].filter((c) => c.stalls).map((c) => c.client);
      for (const c of stalled) c.unstall();
      for (const c of stalled) {
        // A stream the edge closed (e.g. on overflow) is reopened; its channels restart with resync.
        if (c.options.kind !== 'inline' && c.stream === null) {
          await c.openStream();
          reopened++;
        }
      }
      const end = performance.now() + req.timeoutMs;
      while (stalled.some((c) => c.log('state').lastSeq() < req.catchUpStateSeq)) {
        if (performance.now() > end)
          throw new Error('stalled observers did not catch up on the reliable channel after they read again');
        await new Promise((r) => setTimeout(r, 20));
      }
      return reply({ type: 'unstalled', reopenedStreams: reopened });
    }
    case 'report':
      return reply({
        type: 'report',
        observers: [...clients].map(([index, c]) => report(index, c.client, c.stalls, req)),
      });
    case 'close':
      for (const c of clients.values()) c.client.terminate();
      reply({ type: 'closed' });
      process.disconnect();
      return;
  }
}

function report(
  index: number,
  c: ObserverClient,
  stalls: boolean,
  req: Extract<FleetRequest, { type: 'report' }>,
): ObserverReport {
  const grants = (
    c.ready!.granted as { channels: { channel: string; channel_id: number; rate_hz: number | null }[] }
  ).channels;
  return {
    index,
    kind: c.options.kind,
    stalls,
    session_id: c.ready!.session_id as string,
    closed: c.closed,
    streamCloses: c.streamCloses.length,
    inlineAfterStream: c.inlineAfterStream,
    channels: grants.map((g) => {
      const log = c.channels.get(g.channel_id);
      let gaps = 0;
      let resyncs = 0;
      const resyncSeqs: number[] = [];
      const latencies: number[] = [];
      if (log !== undefined) {
        for (let i = 0; i < log.count; i++) {
          if (isResyncKeyframe(log.flags[i]!)) {
            resyncs++;
            resyncSeqs.push(log.seq[i]!);
          }
          if (i > 0 && log.seq[i]! !== log.seq[i - 1]! + 1 && !isResyncKeyframe(log.flags[i]!)) gaps++;
          latencies.push(log.tsSend[i]! >= 0 ? log.recv[i]! - log.tsSend[i]! : -1);
        }
      }
      const perFrame = req.perFrame === undefined || req.perFrame.includes(g.channel);
      const w = req.window;
      return {
        channel_id: g.channel_id,
        name: g.channel,
        rate_hz: g.rate_hz,
        seqs: perFrame ? (log?.seq ?? []) : [],
        ts: perFrame ? (log?.ts ?? []) : [],
        latencies: perFrame ? latencies : [],
        ...(w !== undefined && { inWindow: (log?.ts ?? []).filter((t) => t >= w.from && t <= w.to).length }),
        count: log?.count ?? 0,
        lastSeq: log?.lastSeq() ?? -1,
        orderViolations: log?.orderViolations ?? [],
        crossedInFlight: log?.crossedInFlight ?? 0,
        unexplainedGaps: gaps,
        resyncs,
        resyncSeqs,
      };
    }),
  };
}

process.on('message', (req: FleetRequest) => {
  handle(req).catch((err: unknown) =>
    reply({ type: 'error', message: err instanceof Error ? err.message : String(err) }),
  );
});
process.on('disconnect', () => {
  for (const c of clients.values()) c.client.terminate();
  setTimeout(() => process.exit(0), 100).unref();
});
reply({ type: 'ready' });
