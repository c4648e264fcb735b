// The upload page refuses to validate when its validator is not the host's
// (headless Chromium against a real host process whose /rules answer is
// rewritten in flight, playwright's route(), to name another validator
// SHA-256), and when the browser cannot run the validator (a WebAssembly
// engine without the artifact's proposals, or none). The page must say so,
// validate nothing and send no upload. Screenshots go to tests/artifacts/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, sameBuildAsHost } from './browser.mjs';
import { HOST_BIN, startHost } from './host.mjs';

const SAMPLES = new URL('../../samples/', import.meta.url).pathname;
const ARTIFACTS = new URL('../../tests/artifacts/', import.meta.url).pathname;
/** The SHA-256 the rewritten /rules claims: some other build of the validator. */
const OTHER_SHA = createHash('sha256').update('another build of the validator').digest('hex');

let root, host, hostUrl, browser;

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  root = mkdtempSync(join(tmpdir(), 'omnigraph-page-sha-'));
  execFileSync(HOST_BIN, ['init', '--root', join(root, 'g'), join(SAMPLES, 'people.pg')], { stdio: 'ignore' });
  ({ url: hostUrl, process: host } = await startHost(['--root', root, '--open']));
  browser = await launch();
});

after(async () => {
  await browser?.close();
  host?.kill('SIGTERM');
  rmSync(root, { recursive: true, force: true });
});

/** A fresh page that records every request it makes ("METHOD /path"). */
async function newPage() {
  const page = await browser.context.newPage();
  await page.setViewportSize({ width: 1100, height: 900 });
  const requests = [];
  page.on('request', (r) => requests.push(`${r.method()} ${new URL(r.url()).pathname}`));
  return { page, requests };
}

/** Rewrites the host's real /rules answer to name OTHER_SHA; `seen` gets the real value. */
async function mismatchRules(page) {
  const seen = { calls: 0, hostSha: null };
  await page.route('**/graphs/*/rules', async (route) => {
    const response = await route.fetch();
    const rules = await response.json();
    seen.calls += 1;
    seen.hostSha = rules.validator_sha256;
    await route.fulfill({ response, json: { ...rules, validator_sha256: OTHER_SHA } });
  });
  return seen;
}

const writes = (requests) => requests.filter((r) => !r.startsWith('GET ') || /^GET \/graphs\/[^/]+\/(load|validate)/.test(r));
const rulesText = (page) => page.textContent('#rules');
/** Waits until the page has opened the graph (or refused to) and its verdict is shown. */
const opened = (page) =>
  page.waitForFunction(() => {
    const text = document.getElementById('rules').textContent;
    return text !== '' && !text.startsWith('Opening');
  }, null, { timeout: 60_000 });

/** Puts the sample file into the page both ways a user can: the file input and a drop. */
async function offerFile(page, name) {
  const text = readFileSync(join(SAMPLES, name), 'utf8');
  await page.evaluate(({ text, name }) => {
    const transfer = new DataTransfer();
    transfer.items.add(new File([text], name, { type: 'application/x-ndjson' }));
    const input = document.getElementById('file');
    input.files = transfer.files;
    input.dispatchEvent(new Event('change', { bubbles: true }));
    document.getElementById('drop').dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
  }, { text, name });
}

test('a validator SHA-256 that differs from the host\'s: the page refuses to validate and uploads nothing', async () => {
  const { page, requests } = await newPage();
  const seen = await mismatchRules(page);
  await page.goto(`${hostUrl}/?graph=g`);
  await opened(page);
  assert.equal(seen.calls, 1, 'the page asked the host for its rules once');
  assert.match(seen.hostSha, /^[0-9a-f]{64}$/);
  assert.notEqual(seen.hostSha, OTHER_SHA);

  // A clear refusal naming both hashes, shown as an error.
  const refusal = await rulesText(page);
  assert.match(refusal, /validator .* differs from the host's/);
  assert.match(refusal, /validation is disabled/);
  assert.ok(refusal.includes(seen.hostSha.slice(0, 12)), `the page's own hash (the host serves the page's artifact): ${refusal}`);
  assert.ok(refusal.includes(OTHER_SHA.slice(0, 12)), `the host's claimed hash: ${refusal}`);
  assert.doesNotMatch(refusal, /same build as the host/);
  assert.ok(await page.$eval('#rules', (p) => p.classList.contains('error')), 'shown as an error');
  assert.equal(await page.isDisabled('#file'), true, 'no file can be chosen');
  assert.equal(await page.isDisabled('#branch'), true);
  assert.equal(await page.isDisabled('#upload'), true);
  await page.screenshot({ path: join(ARTIFACTS, 'page-hash-mismatch.png'), fullPage: true });

  // A valid file pushed in anyway (the input's change event, a drop) is not validated.
  await offerFile(page, 'people.ndjson');
  await page.waitForFunction(() => document.getElementById('status').textContent !== '', null, { timeout: 10_000 });
  await page.waitForTimeout(1_000); // a worker that was asked would report by now
  assert.match(await page.textContent('#status'), /Open a graph first/);
  assert.ok(await page.$eval('#status', (p) => p.classList.contains('error')));
  assert.equal(await page.textContent('#summary'), '', 'no report');
  assert.equal(await page.$eval('#progress', (p) => p.value), 0, 'nothing was read');
  assert.equal(await page.isDisabled('#upload'), true);
  await page.$eval('#upload', (b) => b.click());
  await page.waitForTimeout(500);
  assert.deepEqual(writes(requests), [], `no upload or dry run was sent: ${requests.join(', ')}`);
  assert.equal(await page.textContent('#commit'), '');
  const exported = await (await fetch(`${hostUrl}/graphs/g/export`)).text();
  assert.equal(exported, '', 'the graph is untouched');
  await page.close();
});

test('the host\'s validator changing under an open page: re-opening the graph disables the upload of a validated file', async () => {
  const { page, requests } = await newPage();
  await page.goto(`${hostUrl}/?graph=g`);
  await sameBuildAsHost(page);
  await page.setInputFiles('#file', join(SAMPLES, 'people.ndjson'));
  await page.waitForFunction(() => /is valid\./.test(document.getElementById('status').textContent), null, { timeout: 60_000 });
  assert.equal(await page.isDisabled('#upload'), false);

  const seen = await mismatchRules(page);
  await page.$eval('#rules', (p) => { p.textContent = ''; }); // so the wait below sees the re-opened verdict
  await page.click('#target button[type=submit]');
  await opened(page);
  assert.equal(seen.calls, 1);
  assert.match(await rulesText(page), /differs from the host's.*validation is disabled/);
  assert.equal(await page.isDisabled('#upload'), true, 'the validated file can no longer be uploaded');
  assert.equal(await page.isDisabled('#file'), true);
  await page.$eval('#upload', (b) => b.click());
  await page.waitForTimeout(500);
  assert.deepEqual(writes(requests), [], `no upload was sent: ${requests.join(', ')}`);
  await page.screenshot({ path: join(ARTIFACTS, 'page-hash-mismatch-reopened.png'), fullPage: true });

  // The same page with the host's real answer validates and uploads again,
  // and the request log sees that upload: the refusal came from the hash alone.
  await page.unroute('**/graphs/*/rules');
  await page.click('#target button[type=submit]');
  await sameBuildAsHost(page);
  await page.waitForFunction(() => !document.getElementById('upload').disabled, null, { timeout: 60_000 });
  await page.click('#upload');
  await page.waitForFunction(() => document.getElementById('commit').textContent.startsWith('Committed'), null, { timeout: 60_000 });
  assert.deepEqual(writes(requests), ['POST /graphs/g/load/ndjson']);
  await page.close();
});

for (const [browserLacks, disable] of [
  // An engine without one of the proposals the artifact uses rejects its bytes.
  ['the artifact\'s WebAssembly proposals', () => { WebAssembly.validate = () => false; }],
  ['WebAssembly', () => { delete globalThis.WebAssembly; }],
]) {
  test(`a browser without ${browserLacks}: the page says which browsers run the validator and validates nothing`, async () => {
    const { page, requests } = await newPage();
    await page.addInitScript(disable);
    await page.goto(`${hostUrl}/?graph=g`);
    await opened(page);
    const refusal = await rulesText(page);
    assert.match(refusal, /This browser cannot run the validator/);
    assert.match(refusal, /Chrome or Edge 96\+, Firefox 114\+, Safari 16\.4\+/);
    assert.match(refusal, /Validation is disabled/);
    assert.ok(await page.$eval('#rules', (p) => p.classList.contains('error')), 'shown as an error');
    assert.equal(await page.isDisabled('#file'), true, 'no file can be chosen');
    assert.equal(await page.isDisabled('#upload'), true);
    await offerFile(page, 'people.ndjson');
    await page.waitForFunction(() => document.getElementById('status').textContent !== '', null, { timeout: 10_000 });
    await page.waitForTimeout(500);
    assert.match(await page.textContent('#status'), /Open a graph first/);
    assert.equal(await page.textContent('#summary'), '', 'no report');
    assert.deepEqual(writes(requests), [], `nothing was sent: ${requests.join(', ')}`);
    await page.close();
  });
}
