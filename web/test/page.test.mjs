// The upload page end to end: headless Chromium (playwright-core) against a
// real host process serving the page and a temporary graph. Screenshots of
// each state go to tests/artifacts/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, sameBuildAsHost, warmedUp } from './browser.mjs';
import { HOST_BIN, startHost } from './host.mjs';

const SAMPLES = new URL('../../samples/', import.meta.url).pathname;
const ARTIFACTS = new URL('../../tests/artifacts/', import.meta.url).pathname;

let root, host, hostUrl, browser, page;

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  root = mkdtempSync(join(tmpdir(), 'omnigraph-page-'));
  execFileSync(HOST_BIN, ['init', '--root', join(root, 'g'), join(SAMPLES, 'people.pg')], { stdio: 'ignore' });
  ({ url: hostUrl, process: host } = await startHost(['--root', root, '--open']));
  browser = await launch();
  page = await browser.context.newPage();
  await page.setViewportSize({ width: 1100, height: 900 });
  await page.goto(`${hostUrl}/?graph=g`);
  await sameBuildAsHost(page);
});

after(async () => {
  await browser?.close();
  host?.kill('SIGTERM');
  rmSync(root, { recursive: true, force: true });
});

const statusText = () => page.evaluate(() => document.getElementById('status').textContent);
const settled = () => page.waitForFunction(() => /is valid\.|error\(s\)/.test(document.getElementById('status').textContent), null, { timeout: 120_000 });

test('the Worker warms the validator as the page opens, before a file is chosen (web/warm.js)', async () => {
  assert.match(await warmedUp(page), /^\d+ ms$/);
});

test('the page asks for web/load.js along with app.js, not after app.js arrives (so the validator download is not a round trip later)', async () => {
  const timing = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType('resource')
    .filter((e) => ['/web/app.js', '/web/load.js'].includes(new URL(e.name).pathname))
    .map((e) => [new URL(e.name).pathname, { start: e.startTime, end: e.responseEnd }])));
  assert.ok(timing['/web/app.js'] && timing['/web/load.js'], `both fetched: ${JSON.stringify(timing)}`);
  assert.ok(timing['/web/load.js'].start < timing['/web/app.js'].end, `load.js requested before app.js was received: ${JSON.stringify(timing)}`);
});

test('a bad file shows its errors by line and code and cannot be uploaded', async () => {
  await page.screenshot({ path: join(ARTIFACTS, 'page-opened.png'), fullPage: true });
  await page.setInputFiles('#file', join(SAMPLES, 'people-bad.ndjson'));
  await settled();
  const rows = await page.$$eval('#errors tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  const pairs = rows.map(([line, code]) => `${line}:${code}`);
  for (const expected of ['1:range_violation', '2:unknown_type', '3:unknown_property', '3:invalid_date', '5:multiline_record']) {
    assert.ok(pairs.some((p) => p === expected), `${expected} in ${pairs}`);
  }
  assert.equal(await page.isDisabled('#upload'), true);
  // Filter by code, sort by code.
  await page.selectOption('#code-filter', 'unknown_type');
  assert.equal(await page.$$eval('#errors tbody tr', (trs) => trs.length), 1);
  await page.selectOption('#code-filter', '');
  await page.click('[data-sort="code"]');
  const codes = await page.$$eval('#errors tbody tr td:nth-child(2)', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(codes, [...codes].sort());
  await page.screenshot({ path: join(ARTIFACTS, 'page-invalid.png'), fullPage: true });
});

test('a valid file is uploaded and its commit shown; the export holds its rows', async () => {
  await page.setInputFiles('#file', join(SAMPLES, 'people.ndjson'));
  await settled();
  assert.match(await statusText(), /is valid\./);
  assert.equal(await page.isDisabled('#upload'), false);
  await page.click('#upload');
  await page.waitForFunction(() => document.getElementById('commit').textContent.startsWith('Committed'), null, { timeout: 60_000 });
  assert.match(await page.textContent('#commit'), /#1 on main/);
  await page.screenshot({ path: join(ARTIFACTS, 'page-committed.png'), fullPage: true });
  const exported = await (await fetch(`${hostUrl}/graphs/g/export`)).text();
  assert.match(exported, /"id":"Grace"/);
  assert.equal(exported.trim().split('\n').length, 5);
  // The shipped sample names its edges, so uploading it again is a clean merge.
  await page.setInputFiles('#file', join(SAMPLES, 'people-bad.ndjson'));
  await settled();
  await page.setInputFiles('#file', join(SAMPLES, 'people.ndjson'));
  await settled();
  await page.click('#upload');
  await page.waitForFunction(() => document.getElementById('commit').textContent.includes('#2 on main'), null, { timeout: 60_000 });
});

test('a 31 MiB file of 38 batches: the progress bar moves and the page stays responsive', async () => {
  const big = join(root, 'big.ndjson');
  const line = (i) => `{"type":"Person","data":{"name":"person-${String(i).padStart(9, '0')}","age":${i % 150},"email":"p${i}@example.org"}}\n`;
  const lines = [];
  for (let i = 0; i < 310_000; i++) lines.push(line(i));
  writeFileSync(big, lines.join(''));
  await page.evaluate(() => {
    window.__samples = [];
    window.__ticks = 0;
    window.__sampler = setInterval(() => {
      window.__ticks += 1;
      window.__samples.push(Number(document.getElementById('progress').value));
    }, 5);
  });
  await page.setInputFiles('#file', big);
  await settled();
  const { samples, ticks, max } = await page.evaluate(() => {
    clearInterval(window.__sampler);
    return { samples: window.__samples, ticks: window.__ticks, max: Number(document.getElementById('progress').max) };
  });
  const distinct = new Set(samples.filter((v) => v > 0));
  assert.ok(distinct.size >= 2, `the progress bar moved: ${[...distinct].slice(0, 5)}`);
  assert.equal(Math.max(...samples), max, 'it reached the end');
  assert.ok(ticks >= 20, `the page kept running timers while the worker validated (${ticks} ticks)`);
  assert.match(await statusText(), /is valid\./, 'over 8,192 rows in one table: split, every batch valid');
  assert.match(await page.textContent('#summary'), /310000 records on 310000 lines.*uploaded in 38 batches/);
  await page.screenshot({ path: join(ARTIFACTS, 'page-large-file.png'), fullPage: true });
});
