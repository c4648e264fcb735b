// A returning visitor's validator: the upload page compiles the artifact by
// streaming from its response, so Chromium keeps V8's optimised code for it
// in its code cache, and the next visit (a new browser on the same profile)
// gets that code back after revalidating the artifact with the real host
// (`no-cache` and an ETag: a 304, not the 1 MB again). A page that compiles
// a copy of the bytes gets no code cache at all. Headless Chromium against
// a real host process; the cache's use is read from V8's trace events.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CACHE_AT_ONCE, launch, sameBuildAsHost, traceEvents, warmedUp, wasmCodeCached } from './browser.mjs';
import { HOST_BIN, startHost } from './host.mjs';
import { VALIDATOR_PATH } from '../load.js';

const SAMPLES = new URL('../../samples/', import.meta.url).pathname;
/** Far more than V8 takes to store the code once it is compiled (CACHE_AT_ONCE). */
const CACHE_WRITE_TIMEOUT_MS = 60_000;

let root, host, hostUrl;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'omnigraph-page-cache-'));
  execFileSync(HOST_BIN, ['init', '--root', join(root, 'g'), join(SAMPLES, 'people.pg')], { stdio: 'ignore' });
  ({ url: hostUrl, process: host } = await startHost(['--root', root, '--open']));
});

after(() => {
  host?.kill('SIGTERM');
  rmSync(root, { recursive: true, force: true });
});

/** Opens the upload page on graph g and waits until the validator is loaded and warmed. */
async function openPage(context) {
  const page = await context.newPage();
  const trace = await traceEvents(context, page);
  await page.goto(`${hostUrl}/?graph=g`);
  await sameBuildAsHost(page);
  assert.match(await warmedUp(page), /^\d+ ms$/, 'the warm-up ran');
  return { page, trace };
}

test('a returning visit compiles the validator from V8\'s code cache, after a 304 from the host', async () => {
  const profile = join(root, 'profile');
  // Both visits with CACHE_AT_ONCE: V8 refuses code cached under other flags
  // (its flag hash is part of the entry).
  const first = await launch({ profile, args: [CACHE_AT_ONCE] });
  try {
    const { trace } = await openPage(first.context);
    assert.ok(await wasmCodeCached(profile, CACHE_WRITE_TIMEOUT_MS), 'the first visit left the validator\'s code in the code cache');
    const events = await trace.stop();
    assert.ok(events.has('v8.wasm.cachedModule'), `stored by the page's compile: ${[...events].filter((e) => e.includes('wasm'))}`);
  } finally {
    await first.close();
  }

  const second = await launch({ profile, args: [CACHE_AT_ONCE] });
  try {
    const { page, trace } = await openPage(second.context);
    const events = await trace.stop();
    const wasmEvents = [...events].filter((e) => e.includes('wasm'));
    assert.ok(events.has('v8.wasm.moduleCacheHit'), `served from the code cache: ${wasmEvents}`);
    assert.ok(!events.has('v8.wasm.moduleCacheInvalid'), `a valid cache entry: ${wasmEvents}`);
    // Revalidated, not downloaded: only headers crossed the wire.
    const artifact = await page.evaluate((name) => {
      const entry = performance.getEntriesByType('resource').find((e) => new URL(e.name).pathname === name);
      return entry && { transferSize: entry.transferSize, encodedBodySize: entry.encodedBodySize };
    }, VALIDATOR_PATH);
    assert.ok(artifact, 'the page fetched the artifact');
    assert.ok(artifact.transferSize > 0 && artifact.transferSize < artifact.encodedBodySize, `a 304 revalidation: ${JSON.stringify(artifact)}`);
    // The module from the cache validates as the compiled one does.
    await page.setInputFiles('#file', join(SAMPLES, 'people-bad.ndjson'));
    await page.waitForFunction(() => /error\(s\)/.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
    const codes = await page.$$eval('#errors tbody tr td:nth-child(2)', (tds) => tds.map((td) => td.textContent));
    assert.ok(codes.includes('range_violation') && codes.includes('unknown_type'), `the sample's errors: ${codes}`);
  } finally {
    await second.close();
  }
});
