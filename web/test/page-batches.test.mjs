// The upload page with files of several batches: headless Chromium against a
// real `serve --auth` host whose bounds (`--limits`) make a small file
// several batches. Every batch is validated before anything is sent (errors
// by file line), a valid file is committed one batch per commit, an upload
// cut after batch 2 resumes after a reload without loading a batch twice,
// and a multi-batch overwrite is one commit or a clear refusal.
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
const TOKEN = `tok-${randomBytes(16).toString('hex')}`;
/** Ten rows per table and batch: 40 people and 20 edges are 4 + 2 batches. */
const LIMITS = { max_table_rows: 10, max_batch_bytes: 4096 };

let root, host, hostUrl, browser, page;
/** The batch key of every load the page sent. */
const loads = [];
/** Set by a test to handle the page's next load requests itself. */
let interceptLoad = null;

const hostCall = (path, init = {}) => fetch(`${hostUrl}${path}`, { ...init, headers: { authorization: `Bearer ${TOKEN}`, ...init.headers } });
const exported = async (branch = 'main') => (await (await hostCall(`/graphs/g/export?branch=${branch}`)).text()).trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
const commits = async (branch = 'main') => (await (await hostCall(`/graphs/g/commits?branch=${branch}`)).json()).commits;
const text = (id) => page.textContent(`#${id}`);

/** `count` people and an edge from every other one to the next. */
function peopleFile(name, count, { offset = 0, bad = {} } = {}) {
  const lines = [];
  for (let i = offset; i < offset + count; i++) {
    lines.push(JSON.stringify({ type: 'Person', data: { name: `person-${i}`, age: 20 + (i % 50) } }));
    if (i % 2 === 1) lines.push(JSON.stringify({ edge: 'Knows', id: `knows-${i}`, from: `person-${i}`, to: `person-${i - 1}` }));
  }
  for (const [line, replace] of Object.entries(bad)) lines[line - 1] = replace(lines[line - 1]);
  const path = join(root, name);
  writeFileSync(path, lines.join('\n') + '\n');
  return { path, lines };
}

async function choose(path, mode = 'append') {
  await page.selectOption('#mode', mode);
  await page.setInputFiles('#file', path);
  await page.waitForFunction(() => /is valid\.|error\(s\)/.test(document.getElementById('status').textContent), null, { timeout: 120_000 });
}

const finished = () => page.waitForFunction(() => {
  const commit = document.getElementById('commit');
  return commit.textContent.startsWith('Committed') || commit.classList.contains('error');
}, null, { timeout: 120_000 });

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  root = mkdtempSync(join(tmpdir(), 'omnigraph-page-batches-'));
  execFileSync(HOST_BIN, ['init', '--root', join(root, 'g'), join(SAMPLES, 'people.pg')], { stdio: 'ignore' });
  const digest = createHash('sha256').update(TOKEN).digest('hex');
  writeFileSync(join(root, 'tokens.toml'), `[[token]]\nactor = "loader"\nsha256 = "${digest}"\ngraphs = { g = ["read", "change", "branch_create"] }\n`);
  writeFileSync(join(root, 'limits.json'), JSON.stringify(LIMITS));
  ({ url: hostUrl, process: host } = await startHost(['--root', root, '--auth', join(root, 'tokens.toml'), '--limits', join(root, 'limits.json')]));
  browser = await launch();
  page = await browser.context.newPage();
  await page.setViewportSize({ width: 1100, height: 900 });
  // The Worker's uploads, as the page sends them (context routes see workers' requests too).
  await browser.context.route('**/graphs/g/load/ndjson**', async (route) => {
    loads.push(new URL(route.request().url()).searchParams.get('batch_key'));
    return (interceptLoad ?? ((r) => r.continue()))(route);
  });
  await page.goto(`${hostUrl}/?graph=g`);
  await page.fill('#token', TOKEN);
  await page.click('#target button[type=submit]');
  await sameBuildAsHost(page);
});

after(async () => {
  await browser?.close();
  host?.kill('SIGTERM');
  rmSync(root, { recursive: true, force: true });
});

test('every batch of a bad file is validated; errors name whole-file lines; nothing is sent', async () => {
  // Line 41 is a person in the nodes pass's third batch, line 57 an edge in the edges pass.
  const { lines } = peopleFile('bad.ndjson', 40, {
    bad: { 41: (l) => l.replace('"age":', '"agee":'), 57: (l) => l.replace('"Knows"', '"Likes"') },
  });
  assert.match(lines[56], /"edge":"Likes"/);
  await choose(join(root, 'bad.ndjson'));
  assert.match(await text('status'), /has 2 error\(s\)/);
  const rows = await page.$$eval('#errors tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  assert.deepEqual(rows.map(([line, code]) => `${line}:${code}`), ['41:unknown_property', '57:unknown_type']);
  assert.match(await text('summary'), /on 60 lines/);
  assert.equal(await page.isDisabled('#upload'), true);
  assert.deepEqual(loads, []);
  await page.screenshot({ path: join(ARTIFACTS, 'page-batches-invalid.png'), fullPage: true });
});

test('a valid file of 6 batches: cut after batch 2, reloaded, resumed; every record once', async () => {
  const { path, lines } = peopleFile('people.ndjson', 40);
  await choose(path);
  assert.match(await text('status'), /is valid\./);
  assert.match(await text('summary'), /uploaded in 6 batches, one commit each/);
  // Batch 3 reaches the host and commits, but its answer never reaches the page.
  let seen = 0;
  interceptLoad = async (route) => {
    seen += 1;
    if (seen < 3) return route.continue();
    await route.fetch();
    return route.abort('connectionreset');
  };
  await page.click('#upload');
  await page.waitForFunction(() => document.getElementById('commit').classList.contains('error'), null, { timeout: 60_000 });
  assert.match(await text('commit'), /Upload stopped: .* upload again to resume/);
  assert.equal((await commits()).length, 1 + 3, 'init plus three batches are committed');
  interceptLoad = null;

  await page.reload();
  await sameBuildAsHost(page);
  await choose(path);
  assert.match(await text('status'), /interrupted after 2 of 6 batches: uploading resumes it/);
  assert.equal(await page.textContent('#upload'), 'Resume upload');
  await page.click('#upload');
  await finished();
  assert.match(await text('commit'), /^Committed 3 batches as commits #4–#6 on main/);

  const log = await commits();
  const keys = log.map((c) => c.batch_key).filter(Boolean);
  assert.equal(keys.length, 6, 'one commit per batch');
  assert.equal(new Set(keys).size, 6);
  assert.equal(new Set(keys.map((k) => k.split(':')[0])).size, 1, 'one run');
  assert.equal(loads.filter((k) => k === loads[2]).length, 1, 'batch 3 was sent once: the resume found it in the log');
  const rows = await exported();
  assert.equal(rows.length, lines.length, 'every record is in the graph');
  assert.equal(new Set(rows.map((r) => `${r.type ?? r.edge}:${r.id}`)).size, lines.length, 'and each exactly once');
  assert.equal(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('omnigraph.upload')).length), 0, 'the finished upload left no checkpoint');
  await page.screenshot({ path: join(ARTIFACTS, 'page-batches-committed.png'), fullPage: true });
});

test('a multi-batch overwrite is published as one commit; a moved target refuses it and changes nothing', async () => {
  // 20 other people and their edges (3 batches): Person and Knows are replaced by exactly these.
  const { path, lines } = peopleFile('replacement.ndjson', 20, { offset: 100 });
  await choose(path, 'overwrite');
  assert.match(await text('summary'), /in 3 batches, one commit each, published as one overwrite/);
  const before = (await commits()).length;
  await page.click('#upload');
  await finished();
  assert.match(await text('commit'), /^Committed the overwrite as .* on main.*after 3 batches on a work branch/);
  const log = await commits();
  assert.equal(log.length, before + 1, 'the target got one commit');
  assert.match(log[0].batch_key, /:publish$/);
  const rows = await exported();
  assert.equal(rows.length, lines.length);
  assert.ok(rows.every((r) => /^(person|knows)-1\d\d$/.test(r.id)), 'only the replacement is left');
  const branches = (await (await hostCall('/graphs/g/branches')).json()).branches.map((b) => b.name);
  assert.deepEqual(branches, ['main'], 'the work branch is gone');

  // Someone commits to main while the batches go to the work branch: the publish is refused.
  const second = peopleFile('replacement-2.ndjson', 20, { offset: 200 });
  await choose(second.path, 'overwrite');
  interceptLoad = async (route) => {
    interceptLoad = null;
    const res = await hostCall('/graphs/g/load/ndjson?mode=merge', { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: '{"type":"Company","data":{"name":"Interloper"}}\n' });
    assert.equal(res.status, 200);
    return route.continue();
  };
  await page.click('#upload');
  await finished();
  assert.match(await text('commit'), /HTTP 409, target_moved/);
  assert.match(await text('commit'), /The overwrite was not published: the branch is unchanged/);
  const after = await exported();
  assert.equal(after.filter((r) => r.type === 'Person').length, 20);
  assert.ok(after.filter((r) => r.type === 'Person').every((r) => /^person-1\d\d$/.test(r.id)), 'the first overwrite still stands');
  assert.ok(after.some((r) => r.id === 'Interloper'), 'the other commit stands');
  assert.match(await text('commit'), /upload again to overwrite the branch as it is now/i);
  assert.equal(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('omnigraph.upload')).length), 0, 'a refused publish starts over, not resumes');
});
