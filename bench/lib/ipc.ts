/**
 * The child side of the benchmark processes' IPC: a `hello` once started, then request/answer pairs
 * (`{id, type, ...}` -> `{id, ok, ...}`). A child exits when its parent goes away, so an interrupted
 * run leaves nothing behind.
 */

export type Message = Record<string, unknown> & { type: string };
export type Handler = (msg: Message) => Promise<Record<string, unknown>> | Record<string, unknown>;

export function serve(handlers: Record<string, Handler>, hello: Record<string, unknown>): void {
  process.on('message', (raw: unknown) => {
    const msg = raw as Message & { id: number };
    const handler = handlers[msg.type];
    // The parent may have given up waiting and gone: a failed send is not this process's error.
    const answer = (body: Record<string, unknown>) => {
      if (process.connected) process.send?.({ ...body, id: msg.id }, undefined, undefined, () => undefined);
    };
    if (handler === undefined) {
      answer({ ok: false, error: `unknown request ${msg.type}` });
      return;
    }
    Promise.resolve()
      .then(() => handler(msg))
      .then(
        (body) => answer({ ok: true, ...body }),
        (err: unknown) =>
          answer({ ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
      );
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.({ type: 'hello', pid: process.pid, ...hello }, undefined, undefined, () => undefined);
}

/** Process CPU since `from` (process.cpuUsage), as a share of one core over `wallMs`. */
export function cpuShare(
  from: NodeJS.CpuUsage,
  wallMs: number,
): { user_ms: number; system_ms: number; cpu_pct: number } {
  const d = process.cpuUsage(from);
  const user = d.user / 1000;
  const system = d.system / 1000;
  return { user_ms: round(user), system_ms: round(system), cpu_pct: round(((user + system) / wallMs) * 100) };
}

export function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** process.memoryUsage() after two full collections when the process runs with --expose-gc. */
export async function memoryAfterGc(): Promise<Record<string, unknown>> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc !== undefined) {
    gc();
    await new Promise((r) => setImmediate(r));
    gc();
  }
  return { memory: process.memoryUsage(), gc: gc !== undefined };
}
