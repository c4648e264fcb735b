// The upload page behind `serve --auth`: headless Chromium (playwright-core)
// against a real host process with a temporary token file (SHA-256 digests).
// A missing, wrong or under-privileged token gets a clear message and sends
// no upload; the right token validates, uploads and commits. The token goes
// in the Authorization header only: never the URL, the log or localStorage;
// the tab keeps it in sessionStorage. Screenshots go to tests/artifacts/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, sameBuildAsHost } from './browser.mjs';
import { HOST_BIN, startHost } from './host.mjs';

const SAMPLES = new URL('../../samples/', import.meta.url).pathname;
const ARTIFACTS = new URL('../../tests/artifacts/', import.meta.url).pathname;
const TOKEN_KEY = 'omnigraph.token';
const token = () => `tok-${randomBytes(16).toString('hex')}`;
/** read + change + branch_create on g. */
const LOADER = token();
/** A token the host does not know. */
const WRONG = token();
/** read on g only. */
const READER = token();
/** read on another graph only. */
const OUTSIDER = token();
const ALL_TOKENS = [LOADER, WRONG, READER, OUTSIDER];

let root, host, hostUrl, browser, page;
const requests = [];
const consoleLines = [];

const sha = (t) => createHash('sha256').update(t).digest('hex');
const hostGet = (path, t = LOADER) => fetch(`${hostUrl}${path}`, { headers: { authorization: `Bearer ${t}` } });
const writes = () => requests.filter((r) => !r.line.startsWith('GET ') || /^GET \/graphs\/[^/]+\/(load|validate)/.test(r.line));
const rulesText = () => page.textContent('#rules');
/** Opens the graph with `t` typed into the token field; resolves when the page has a verdict. */
async function openWith(t) {
  await page.fill('#token', t);
  await page.$eval('#rules', (p) => { p.textContent = ''; });
  await page.click('#target button[type=submit]');
  await page.waitForFunction(() => {
    const text = document.getElementById('rules').textContent;
    return text !== '' && !text.startsWith('Opening');
  }, null, { timeout: 60_000 });
}
const settled = () => page.waitForFunction(() => /is valid\.|error\(s\)/.test(document.getElementById('status').textContent), null, { timeout: 120_000 });

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  root = mkdtempSync(join(tmpdir(), 'omnigraph-page-auth-'));
  execFileSync(HOST_BIN, ['init', '--root', join(root, 'g'), join(SAMPLES, 'people.pg')], { stdio: 'ignore' });
  const tokens = join(root, 'tokens.toml');
  writeFileSync(tokens, [
    `[[token]]\nactor = "loader"\nsha256 = "${sha(LOADER)}"\ngraphs = { g = ["read", "change", "branch_create"] }\n`,
    `[[token]]\nactor = "reader"\nsha256 = "${sha(READER)}"\ngraphs = { g = ["read"] }\n`,
    `[[token]]\nactor = "outsider"\nsha256 = "${sha(OUTSIDER)}"\ngraphs = { other = ["read", "change"] }\n`,
  ].join('\n'));
  ({ url: hostUrl, process: host } = await startHost(['--root', root, '--auth', tokens]));
  browser = await launch();
  page = await browser.context.newPage();
  await page.setViewportSize({ width: 1100, height: 900 });
  page.on('request', (r) => requests.push({ line: `${r.method()} ${new URL(r.url()).pathname}`, url: r.url(), auth: r.headers().authorization ?? null }));
  page.on('console', (m) => consoleLines.push(m.text()));
  page.on('pageerror', (e) => consoleLines.push(String(e)));
  await page.goto(`${hostUrl}/?graph=g`);
  await page.waitForFunction(() => document.getElementById('rules').textContent.startsWith('Could not open'), null, { timeout: 60_000 });
});

after(async () => {
  await browser?.close();
  host?.kill('SIGTERM');
  rmSync(root, { recursive: true, force: true });
});

test('no token, a wrong token, a token for another graph: a clear message, no upload, the graph unchanged', async () => {
  // The first open (empty field) sent no Authorization header and was refused.
  const first = requests.filter((r) => r.line.startsWith('GET /graphs/g/'));
  assert.ok(first.length >= 3 && first.every((r) => r.auth === null), JSON.stringify(first));
  assert.match(await rulesText(page), /requires a bearer token \(401\)/);

  await openWith(WRONG);
  const wrong = await rulesText();
  assert.match(wrong, /The host did not accept the token \(401\): check the token/);
  assert.ok(await page.$eval('#rules', (p) => p.classList.contains('error')), 'shown as an error');
  assert.equal(await page.isDisabled('#file'), true, 'no file can be chosen');
  assert.equal(await page.isDisabled('#upload'), true);
  assert.equal(await page.isDisabled('#branch'), true);
  assert.equal(await page.textContent('#schema'), '');
  assert.ok(requests.some((r) => r.auth === `Bearer ${WRONG}`), 'the typed token was sent');
  await page.screenshot({ path: join(ARTIFACTS, 'page-auth-wrong-token.png'), fullPage: true });

  await openWith(OUTSIDER);
  assert.match(await rulesText(), /This token may not read graph g \(403: it lacks the read permission\)/);
  assert.equal(await page.isDisabled('#upload'), true);
  await page.screenshot({ path: join(ARTIFACTS, 'page-auth-forbidden.png'), fullPage: true });

  // A valid file pushed in anyway is not validated, and a click on the disabled button sends nothing.
  await page.evaluate(() => {
    const transfer = new DataTransfer();
    transfer.items.add(new File(['{"type":"Person","data":{"name":"x","age":1}}\n'], 'x.ndjson'));
    document.getElementById('drop').dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
  });
  assert.match(await page.textContent('#status'), /Open a graph first/);
  await page.$eval('#upload', (b) => b.click());
  await page.waitForTimeout(500);
  assert.deepEqual(writes(), [], 'no load or dry run was sent');
  assert.equal(await (await hostGet('/graphs/g/export')).text(), '', 'the graph is untouched');
});

test('a read-only token opens and validates, but its upload is refused (403, change) and nothing is committed', async () => {
  await openWith(READER);
  assert.match(await rulesText(), /same build as the host/);
  await settled(); // the file dropped while no graph was open is validated on open
  await page.setInputFiles('#file', join(SAMPLES, 'people.ndjson'));
  await page.waitForFunction(() => /people\.ndjson is valid\./.test(document.getElementById('status').textContent), null, { timeout: 120_000 });
  assert.equal(await page.isDisabled('#upload'), false);
  await page.click('#upload');
  await page.waitForFunction(() => document.getElementById('commit').textContent.includes('403'), null, { timeout: 60_000 });
  const refusal = await page.textContent('#commit');
  assert.match(refusal, /This token may not change graph g \(403: it lacks the change permission\)/);
  assert.match(refusal, /nothing was committed/);
  assert.equal(await page.isDisabled('#upload'), true, 'the upload button stays disabled');
  assert.deepEqual(writes().map((r) => [r.line, r.auth]), [['POST /graphs/g/load/ndjson', `Bearer ${READER}`]]);
  assert.equal(await (await hostGet('/graphs/g/export')).text(), '', 'the graph is untouched');
  await page.screenshot({ path: join(ARTIFACTS, 'page-auth-read-only.png'), fullPage: true });
});

test('the right token, without reloading the page: validate, upload, commit; the export holds the records', async () => {
  const before = requests.length;
  await openWith(LOADER);
  assert.match(await rulesText(), /Graph g: .*same build as the host/);
  assert.equal(await page.$eval('#rules', (p) => p.classList.contains('error')), false);
  // The file chosen before is validated again on open.
  await page.waitForFunction(() => /people\.ndjson is valid\./.test(document.getElementById('status').textContent), null, { timeout: 120_000 });
  assert.equal(await page.isDisabled('#upload'), false);
  await page.click('#upload');
  await page.waitForFunction(() => document.getElementById('commit').textContent.startsWith('Committed'), null, { timeout: 60_000 });
  assert.match(await page.textContent('#commit'), /#1 on main/);
  assert.equal(await page.$eval('#commit', (p) => p.classList.contains('error')), false);
  await page.screenshot({ path: join(ARTIFACTS, 'page-auth-committed.png'), fullPage: true });

  // Every API call since carried the token; page assets need none.
  const api = requests.slice(before).filter((r) => new URL(r.url).pathname.startsWith('/graphs/'));
  assert.ok(api.length >= 4, JSON.stringify(api));
  for (const r of api) assert.equal(r.auth, `Bearer ${LOADER}`, r.line);
  assert.deepEqual(writes().map((r) => [r.line, r.auth]).slice(-1), [['POST /graphs/g/load/ndjson', `Bearer ${LOADER}`]]);

  const exported = await (await hostGet('/graphs/g/export')).text();
  assert.match(exported, /"id":"Grace"/);
  assert.equal(exported.trim().split('\n').length, 5);
  const log = await (await hostGet('/graphs/g/commits?branch=main')).json();
  assert.ok(JSON.stringify(log).includes('"actor":"loader"'), 'committed as the token\'s actor');
  assert.equal((await hostGet('/graphs/g/export', WRONG)).status, 401, 'the host still refuses a wrong token');
});

test('the token is in sessionStorage only: not in the URL, localStorage, the log or the page text; a reload keeps it', async () => {
  const key = await page.evaluate((k) => sessionStorage.getItem(k), TOKEN_KEY);
  assert.equal(key, LOADER);
  const local = await page.evaluate(() => JSON.stringify({ ...localStorage }));
  for (const t of ALL_TOKENS) {
    assert.ok(!page.url().includes(t), 'not in the address');
    assert.ok(!local.includes(t), 'not in localStorage');
    assert.ok(!requests.some((r) => r.url.includes(t)), 'not in any request URL');
    assert.ok(!consoleLines.some((l) => l.includes(t)), 'not logged');
  }
  const text = await page.evaluate(() => document.body.innerText);
  for (const t of ALL_TOKENS) assert.ok(!text.includes(t), 'not shown');
  assert.equal(await page.getAttribute('#token', 'type'), 'password');
  assert.equal(await page.getAttribute('#token', 'name'), null, 'unnamed: a form submission cannot put it in the URL');
  assert.equal(await page.$eval('#token', (i) => i.labels[0].textContent.trim()), 'Token');

  // Same tab, reloaded: the field is filled from sessionStorage and the graph opens with it.
  await page.reload();
  await sameBuildAsHost(page);
  assert.equal(await page.inputValue('#token'), LOADER);
  assert.ok(!page.url().includes(LOADER));
  // Clearing the field removes it from storage.
  await page.fill('#token', '');
  assert.equal(await page.evaluate((k) => sessionStorage.getItem(k), TOKEN_KEY), null);
  await page.screenshot({ path: join(ARTIFACTS, 'page-auth-reloaded.png'), fullPage: true });
});
