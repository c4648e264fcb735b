// The page's splitter (web/split.js) against the CLI's (split.rs): the same
// file and bounds give the same batch keys, halving included; reports name
// file lines; a planned batch read again is the batch that was validated.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, openAsBlob, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PASS, batchKey, batchesOf, catchUp, newRun, planFile, probeLine, readBatch, readReport } from '../split.js';
import { caseNames, readCase } from './corpus.mjs';
import { HOST_BIN } from './host.mjs';

const require = createRequire(import.meta.url);
const pkg = require('../pkg/nodejs/validate.js');
const SCHEMA = readFileSync(new URL('../../samples/people.pg', import.meta.url), 'utf8');
const compiled = pkg.compileSchema(SCHEMA);
const validator = (limits) => {
  const options = JSON.stringify({ mode: 'merge', limits });
  return (bytes) => readReport(compiled.validate(bytes, options));
};

let dir;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'omnigraph-split-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** People with edges between them, interleaved; some node lines mention "edge" in their data. */
function people(count) {
  const lines = [];
  for (let i = 0; i < count; i++) {
    lines.push(JSON.stringify({ type: 'Person', data: { name: `p${i}`, age: i % 100, ...(i % 7 === 0 ? { tags: ['edgewater', 'x'.repeat(i % 50)] } : {}) } }));
    if (i > 0 && i % 4 === 0) lines.push(JSON.stringify({ edge: 'Knows', id: `k${i}`, from: `p${i}`, to: `p${i - 1}` }));
    if (i % 9 === 0) lines.push(JSON.stringify({ edge: 'Knows', id: `f${i}`, from: `p${i}`, to: `p${i + 1}` }));
  }
  return lines;
}

function write(name, lines, { trailingNewline = true } = {}) {
  const path = join(dir, name);
  writeFileSync(path, lines.join('\n') + (trailingNewline ? '\n' : ''));
  return path;
}

test('the same file and bounds give the CLI’s batch keys, halving included', async () => {
  const file = write('parity.ndjson', people(200));
  // A small table-bytes bound makes the validator refuse some batches: both halve them.
  const limits = { max_table_bytes: 1200 };
  writeFileSync(join(dir, 'limits.json'), JSON.stringify(limits));
  const graph = join(dir, 'g');
  execFileSync(HOST_BIN, ['init', '--root', graph, new URL('../../samples/people.pg', import.meta.url).pathname], { stdio: 'ignore' });
  execFileSync(HOST_BIN, ['load', '--root', graph, '--limits', join(dir, 'limits.json'), '--batch-rows', '40', '--batch-bytes', '3000', file], { stdio: 'ignore' });
  const cliKeys = execFileSync(HOST_BIN, ['log', '--root', graph], { encoding: 'utf8' })
    .trim().split('\n').map((l) => JSON.parse(l).batch_key).filter(Boolean).reverse();
  const run = cliKeys[0].split(':')[0];

  const { report, plan } = await planFile(await openAsBlob(file), { maxRows: 40, maxBytes: 3000 }, validator(limits));
  assert.equal(report.ok, true, JSON.stringify(report.errors));
  assert.deepEqual(plan.map((b) => batchKey(run, b)), cliKeys);
  assert.ok(plan.some((b) => b.pass === PASS.edges), 'the file was split into a nodes and an edges pass');
  const unhalved = await planFile(await openAsBlob(file), { maxRows: 40, maxBytes: 3000 }, validator({}));
  assert.ok(plan.length > unhalved.plan.length, `halving made more batches (${plan.length} > ${unhalved.plan.length})`);
  assert.equal(report.stats.records, people(200).length, 'records are summed over the batches');
});

/**
 * Four tables interleaved, some records laid out unlike a writer's (an
 * escaped type name, members in another order, a data member named `edge`
 * or `type`): a batch's cut depends on each table's rows.
 */
function mixed(count) {
  const lines = [];
  for (let i = 0; i < count; i++) {
    if (i % 10 === 0) lines.push(JSON.stringify({ type: 'Company', data: { name: `c${i}` } }));
    if (i % 13 === 5) lines.push(`{"data":{"name":"p${i}","tags":["edge","type"]},"type":"Per\\u0073on"}`);
    else lines.push(JSON.stringify({ type: 'Person', data: { name: `p${i}`, age: i % 100 } }));
    if (i > 0) lines.push(JSON.stringify({ edge: 'Knows', from: `p${i}`, to: `p${i - 1}` }));
    if (i % 3 === 0) lines.push(JSON.stringify({ from: `p${i}`, to: `c${i - (i % 10)}`, edge: 'WorksAt' }));
  }
  return lines;
}

test('rows are counted per table: the CLI’s batch keys, the fewest batches, one batch when every table fits', async () => {
  const lines = mixed(120);
  const file = write('mixed.ndjson', lines);
  const bounds = { maxRows: 50, maxBytes: 1 << 20 };
  const graph = join(dir, 'mixed');
  execFileSync(HOST_BIN, ['init', '--root', graph, new URL('../../samples/people.pg', import.meta.url).pathname], { stdio: 'ignore' });
  execFileSync(HOST_BIN, ['load', '--root', graph, '--batch-rows', '50', file], { stdio: 'ignore' });
  const cliKeys = execFileSync(HOST_BIN, ['log', '--root', graph], { encoding: 'utf8' })
    .trim().split('\n').map((l) => JSON.parse(l)).filter((c) => c.kind === 'load').map((c) => c.batch_key).reverse();
  const run = cliKeys[0].split(':')[0];
  const { report, plan } = await planFile(await openAsBlob(file), bounds, validator({}));
  assert.equal(report.ok, true, JSON.stringify(report.errors));
  assert.deepEqual(plan.map((b) => batchKey(run, b)), cliKeys);
  // 120 people and 119 Knows at 50 rows a table: 3 + 3 batches (50 lines
  // a batch would have made 3 + 4 of the 291 lines).
  assert.deepEqual(plan.map((b) => b.pass), ['n', 'n', 'n', 'e', 'e', 'e']);
  const whole = await planFile(await openAsBlob(file), { maxRows: 120, maxBytes: 1 << 20 }, validator({}));
  assert.deepEqual(whole.plan, [{ pass: PASS.all, start: 0, end: statSync(file).size, firstLine: 0 }], 'every table within 120 rows: one batch of 291 lines');
});

// A line the validator refuses may be read otherwise when laid out as
// writers lay records out (it is not parsed): its file is refused anyway.
test('probeLine reads a line as the CLI’s probe does', () => {
  const { cases } = JSON.parse(readFileSync(new URL('../../tests/split/probe-lines.json', import.meta.url), 'utf8'));
  for (const { line, edge, table } of cases) {
    assert.deepEqual(probeLine(new TextEncoder().encode(line)), { edge, table }, line);
  }
});

test('a file that fits one batch is one batch of pass a', async () => {
  const lines = people(10);
  const file = await openAsBlob(write('small.ndjson', lines));
  const { report, plan } = await planFile(file, { maxRows: 1000, maxBytes: 1 << 20 }, validator({}));
  assert.deepEqual(plan, [{ pass: PASS.all, start: 0, end: file.size, firstLine: 0 }]);
  assert.equal(report.stats.records, lines.length);
});

test('errors of a split file carry file lines and offsets, as if the file were validated whole', async () => {
  const lines = people(120);
  lines[17] = lines[17].replace('"age":', '"agee":'); // a node line: unknown property
  const edgeLine = lines.findIndex((l, i) => i > 90 && l.startsWith('{"edge"'));
  lines[edgeLine] = lines[edgeLine].replace('"Knows"', '"Likes"'); // an edge line: unknown type
  const path = write('bad.ndjson', lines);
  const whole = JSON.parse(compiled.validate(readFileSync(path), JSON.stringify({ mode: 'merge' })));
  const { report, plan } = await planFile(await openAsBlob(path), { maxRows: 25, maxBytes: 2500 }, validator({}));
  assert.ok(plan.length >= 4, `split into ${plan.length} batches`);
  const where = (errors) => errors.map((e) => `${e.line}@${e.offset}:${e.code}`).sort();
  assert.deepEqual(where(report.errors), where(whole.errors));
  assert.ok(report.errors.some((e) => e.line === edgeLine + 1 && e.code === 'unknown_type'), JSON.stringify(report.errors));
  assert.equal(report.ok, false);
});

test('a line longer than one batch is reported once by its file line; the rest is still validated', async () => {
  const lines = people(30);
  lines[5] = JSON.stringify({ type: 'Person', data: { name: 'long', tags: ['y'.repeat(5000)] } });
  lines[12] = lines[12].replace('"age":', '"agee":');
  const { report } = await planFile(await openAsBlob(write('long.ndjson', lines, { trailingNewline: false })), { maxRows: 10, maxBytes: 2000 }, validator({}));
  const codes = report.errors.map((e) => `${e.line}:${e.code}`);
  assert.deepEqual(codes, ['6:line_too_long', '13:unknown_property']);
  assert.equal(report.stats.lines, lines.length - 1, 'every other line was validated, the last one without a newline too');
});

test('a planned batch read again is the batch that was validated', async () => {
  const file = await openAsBlob(write('reread.ndjson', people(150)));
  const bounds = { maxRows: 30, maxBytes: 2500 };
  const { plan } = await planFile(file, bounds, validator({}));
  let index = 0;
  for (const pass of [PASS.nodes, PASS.edges]) {
    for await (const batch of batchesOf(file, pass, bounds)) {
      const again = await readBatch(file, plan[index++]);
      assert.deepEqual(Buffer.from(again.bytes), Buffer.from(batch.bytes), `batch ${index}`);
      assert.deepEqual(again.lines, batch.lines);
    }
  }
  assert.equal(index, plan.length);
});

test('resuming skips exactly the batches whose keys are committed', () => {
  const plan = [0, 10, 20, 30].map((start) => ({ pass: PASS.nodes, start, end: start + 10, firstLine: start }));
  const run = newRun();
  assert.equal(catchUp(plan, run, 1, [batchKey(run, plan[1]), batchKey(run, plan[2]), 'other:n:30-40']), 3);
  assert.equal(catchUp(plan, run, 0, [batchKey(run, plan[1])]), 0, 'a gap stops the catch-up');
  assert.equal(catchUp(plan, run, 2, []), 2);
});

test('runs are ULIDs like the CLI’s; fingerprints name the bytes', async () => {
  const a = newRun(1_700_000_000_000, new Uint8Array(10));
  const b = newRun(1_700_000_000_001, new Uint8Array(10).fill(255));
  assert.match(a, /^[0-9A-HJKMNP-TV-Z]{26}$/);
  assert.ok(a < b, 'later runs sort later');
  assert.equal(a.slice(10), '0'.repeat(16));
  assert.equal(b.slice(10), 'Z'.repeat(16));
  const fingerprint = async (blob, bounds) => (await planFile(blob, bounds, validator({}))).fingerprint;
  const small = { maxRows: 1000, maxBytes: 1 << 20 };
  const one = await fingerprint(new Blob(['{"type":"Person"}\n']), small);
  assert.equal(one, await fingerprint(new Blob(['{"type":', '"Person"}\n']), small));
  assert.notEqual(one, await fingerprint(new Blob(['{"type":"Persom"}\n']), small));
  // A file validated whole and the same file split into passes get one name.
  const lines = people(30).join('\n') + '\n';
  assert.equal(await fingerprint(new Blob([lines]), small), await fingerprint(new Blob([lines]), { maxRows: 7, maxBytes: 600 }));
});

test('readReport reads a report with its external refs counted, not parsed', () => {
  const expected = (text) => {
    const report = JSON.parse(text);
    return { ...report, external_refs: report.external_refs.length };
  };
  // Every corpus report, then edges whose ids hold quotes, backslashes,
  // braces and the member's own name.
  const reports = caseNames().map((name) => readCase(name).expected);
  const weird = ['a"b', 'c\\d', '{"edge":1}', ',"external_refs":[', 'plain'];
  const edges = weird.map((id, i) => JSON.stringify({ edge: 'Knows', id: `w${i}`, from: id, to: `n${i}` })).join('\n') + '\n';
  reports.push(compiled.validate(new TextEncoder().encode(edges), '{}'));
  assert.ok(reports.at(-1).includes('"external_refs":[{'), reports.at(-1));
  let withRefs = 0;
  for (const text of reports) {
    assert.deepEqual(readReport(text), expected(text), text);
    withRefs += expected(text).external_refs > 0;
  }
  assert.ok(withRefs >= 5, `reports with refs: ${withRefs}`);
  // The refs are counted, not parsed: refs that are not JSON still count.
  const head = reports.at(-1).slice(0, reports.at(-1).indexOf(',"external_refs":['));
  assert.equal(readReport(`${head},"external_refs":[{"edge":?},{"edge":?}]}`).external_refs, 2);
  // A layout the shortcut does not know is parsed whole.
  const reordered = JSON.stringify({ external_refs: [{ edge: 'Knows' }], ok: true });
  assert.deepEqual(readReport(reordered), { external_refs: 1, ok: true });
});