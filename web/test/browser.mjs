// Headless Chromium (Debian's), driven by playwright-core, with the flags
// this machine kind needs (no sandbox as root, no background networking).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

// Chromium on this machine kind now and then dies at start-up (SIGSEGV
// before any page exists, so before any of our code runs); a fresh
// process then starts fine. A launch is retried that often, never a test.
const LAUNCH_ATTEMPTS = 3;

export async function launch() {
  for (let attempt = 1; ; attempt++) {
    const userDataDir = await mkdtemp(path.join(os.tmpdir(), 'omnigraph-chromium-'));
    try {
      const context = await chromium.launchPersistentContext(userDataDir, {
        executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--disable-background-networking',
          '--disable-component-update', '--disable-sync', '--no-first-run'],
      });
      return {
        context,
        async close() {
          await context.close();
          await rm(userDataDir, { recursive: true, force: true });
        },
      };
    } catch (error) {
      await rm(userDataDir, { recursive: true, force: true });
      if (attempt === LAUNCH_ATTEMPTS) throw error;
      console.error(`chromium failed to start (attempt ${attempt} of ${LAUNCH_ATTEMPTS}), retrying: ${error.message.split('\n')[0]}`);
    }
  }
}
