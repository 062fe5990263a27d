/**
 * Debian's Chromium driven by playwright-core (never `playwright install`): headless, a fresh profile in a
 * temporary directory, and the page's console and errors collected for the test output.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM_PATH = '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function chromiumAvailable(): boolean {
  return existsSync(CHROMIUM_PATH);
}

export interface TestBrowser {
  readonly context: BrowserContext;
  /** A new page whose console messages and uncaught errors are appended to `log`. */
  newPage(log: string[]): Promise<Page>;
  close(): Promise<void>;
}

export async function launchChromium(): Promise<TestBrowser> {
  const profile = await mkdtemp(join(tmpdir(), 'awp-edge-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: CHROMIUM_ARGS,
      timeout: 15_000,
    });
  } catch (err) {
    await removeProfile(profile);
    throw err;
  }
  return {
    context,
    async newPage(log) {
      const page = await context.newPage();
      page.on('console', (m) => log.push(`[console.${m.type()}] ${m.text()}`));
      page.on('pageerror', (e) => log.push(`[pageerror] ${e.message}`));
      return page;
    },
    async close() {
      await context.close().catch(() => undefined);
      await removeProfile(profile);
    },
  };
}

/**
 * Chromium's helper processes can still write into the profile for a moment after the browser has closed
 * (CI saw ENOTEMPTY on `Default/`): retry, and leave a temporary directory behind rather than fail a test
 * over cleanup.
 */
async function removeProfile(profile: string): Promise<void> {
  await rm(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 }).catch(
    (err: unknown) => {
      console.warn(`could not remove the Chromium profile ${profile}: ${String(err)}`);
    },
  );
}
