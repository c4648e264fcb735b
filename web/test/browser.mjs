// Headless Chromium (Debian's), driven by playwright-core, with the flags
// this machine kind needs (no sandbox as root, no background networking):
// launched with its own profile or a kept one, trace events, the code cache
// on disk, and the page's waits every page test shares (sameBuildAsHost,
// warmedUp).
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

// Chromium on this machine kind now and then dies at start-up (SIGSEGV
// before any page exists, so before any of our code runs); a fresh
// process then starts fine. A launch is retried that often, never a test.
const LAUNCH_ATTEMPTS = 3;

/**
 * A headless Chromium with a profile of its own, removed on close; or, given
 * `profile`, with that directory, which the caller keeps (a later browser
 * on it is a returning visitor: its HTTP cache and V8's code cache).
 * `args`: more command-line switches.
 */
export async function launch({ profile, args = [] } = {}) {
  for (let attempt = 1; ; attempt++) {
    const userDataDir = profile ?? await mkdtemp(path.join(os.tmpdir(), 'omnigraph-chromium-'));
    const removeProfile = () => (profile ? Promise.resolve() : rm(userDataDir, { recursive: true, force: true }));
    try {
      const context = await chromium.launchPersistentContext(userDataDir, {
        executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
          '--disable-component-update', '--disable-sync', '--no-first-run', ...args],
      });
      return {
        context,
        async close() {
          await context.close();
          await removeProfile();
        },
      };
    } catch (error) {
      await removeProfile();
      if (attempt === LAUNCH_ATTEMPTS) throw error;
      console.error(`chromium failed to start (attempt ${attempt} of ${LAUNCH_ATTEMPTS}), retrying: ${error.message.split('\n')[0]}`);
    }
  }
}

/**
 * Starts recording the V8 and Blink trace events of `page` (over the
 * DevTools protocol; before its navigation, to see its loads); `stop()`
 * resolves to the set of event names seen. The wasm code cache's own
 * events ('v8.wasm.cachedModule' when code is stored, 'v8.wasm.moduleCacheHit'
 * when a compile is served from it) are in the timeline category.
 */
export async function traceEvents(context, page) {
  const session = await context.newCDPSession(page);
  const names = new Set();
  session.on('Tracing.dataCollected', ({ value }) => value.forEach((event) => names.add(event.name)));
  const complete = new Promise((resolve) => session.once('Tracing.tracingComplete', resolve));
  await session.send('Tracing.start', { categories: 'devtools.timeline,disabled-by-default-devtools.timeline', transferMode: 'ReportEvents' });
  return {
    async stop() {
      await session.send('Tracing.end');
      await complete;
      await session.detach();
      return names;
    },
  };
}

/**
 * The switch that has V8 store a module's optimised code in the code cache
 * as soon as some is compiled. By default V8 waits until no new code has
 * come for 2 s (`--wasm-caching-timeout-ms`), and in headless Chromium here
 * the write then came 2 to 50 s after the page's warm-up, at no predictable
 * moment. It changes when the code is stored, not whether.
 */
export const CACHE_AT_ONCE = '--js-flags=--wasm-caching-timeout-ms=0';

/**
 * Waits until Chromium has written a compiled wasm module into the code
 * cache of `profile` (an entry besides the cache's index), at most
 * `timeoutMs`; resolves to whether it did.
 */
export async function wasmCodeCached(profile, timeoutMs) {
  const dir = path.join(profile, 'Default', 'Code Cache', 'wasm');
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 250))) {
    const entries = await readdir(dir).catch(() => []);
    if (entries.some((name) => !name.startsWith('index'))) return true;
  }
  return false;
}

/** Waits until the upload page has opened a graph with a validator of the host's own build. */
export async function sameBuildAsHost(page) {
  await page.waitForFunction(() => document.getElementById('rules').textContent.includes('same build as the host'), null, { timeout: 60_000 });
}

/** Waits for the page's Worker to finish its warm-up; returns what the page recorded ("N ms" or "failed: …"). */
export async function warmedUp(page) {
  await page.waitForFunction(() => document.body.dataset.warmUp !== undefined, null, { timeout: 60_000 });
  return page.evaluate(() => document.body.dataset.warmUp);
}
