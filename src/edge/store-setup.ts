import type { StoreConfig } from '../config/schema.js';
import type { TokenMint } from '../session/tokens.js';
import { MemorySessionStore } from '../store/memory-store.js';
import { RedisSessionStore } from '../store/redis-store.js';
import type { SessionStore } from '../session/session-store.js';
import type { Logger } from '../telemetry/logger.js';

/** How long start-up waits for a shared store before it serves anyway (and refuses new sessions). */
const STARTUP_WAIT_MS = 3_000;
const EPOCH_POLL_MS = 1_000;

/** The configured session store; a shared one's token epoch is adopted while it is reachable. */
export async function openStore(
  config: StoreConfig,
  mint: TokenMint,
  log: Logger,
): Promise<{ store: SessionStore; epochReady: () => boolean; stop: () => void }> {
  if (config.kind === 'memory')
    return { store: new MemorySessionStore(), epochReady: () => true, stop: () => undefined };
  const store = new RedisSessionStore({ url: config.url, keyPrefix: config.key_prefix });
  // The epoch is re-read on every poll, not only until first known: a Redis that lost its data
  // (restarted without persistence) gets a new epoch from the first replica to ask, and every replica
  // adopts it, so tokens of the lost sessions are answered AWP_SESSION_UNKNOWN (AWP-SES-008).
  let current: Buffer | null = null;
  let syncing = false;
  const sync = async (): Promise<void> => {
    if (syncing || !store.healthy()) return;
    syncing = true;
    try {
      const epoch = await store.epoch();
      if (current === null) {
        log.info({ event: 'store_ready', store: 'redis', target: store.target }, 'session store reachable');
      } else if (!epoch.equals(current)) {
        log.warn(
          { event: 'store_epoch_changed', store: 'redis', target: store.target },
          'the session store lost its data: the sessions it held are gone (their tokens are now unknown)',
        );
      }
      mint.setEpoch(epoch);
      current = epoch;
    } catch (err) {
      log.error(
        { event: 'store_unavailable', target: store.target, err: (err as Error).message },
        'session store unavailable',
      );
    } finally {
      syncing = false;
    }
  };
  if (await store.whenReady(STARTUP_WAIT_MS)) await sync();
  else {
    log.error(
      { event: 'store_unavailable', store: 'redis', target: store.target },
      'Redis session store unreachable: new sessions are refused and /readyz is false until it is reachable',
    );
  }
  const timer = setInterval(() => void sync(), EPOCH_POLL_MS);
  timer.unref();
  return { store, epochReady: () => current !== null, stop: () => clearInterval(timer) };
}
