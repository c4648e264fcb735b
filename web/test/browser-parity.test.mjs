// Parity in headless Chromium: the web package, served from 127.0.0.1, gives
// every corpus report byte for byte and loads the recorded artifact.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launch } from './browser.mjs';
import { ARTIFACT_SHA256, EXPECTED_IMPORTS, mismatches } from './corpus.mjs';
import { serve } from './serve.mjs';

let http;
let browser;
let results;

before(async () => {
  http = await serve();
  browser = await launch();
  const page = await browser.context.newPage();
  await page.goto(`${http.origin}/web/test/harness.html`);
  await page.waitForFunction(() => window.__results || window.__error, null, { timeout: 120_000 });
  const error = await page.evaluate(() => window.__error);
  assert.equal(error, undefined, `harness failed: ${error}`);
  results = await page.evaluate(() => window.__results);
});

after(async () => {
  await browser?.close();
  http?.server.close();
});

test('chromium loads the artifact with the recorded SHA-256', () => {
  assert.equal(results.sha, ARTIFACT_SHA256);
});

test('chromium sees only the known imports', () => {
  assert.deepEqual(results.imports, EXPECTED_IMPORTS);
});

test('every corpus report is byte-identical in chromium', () => {
  assert.deepEqual(mismatches('chromium', results.reports), []);
});
