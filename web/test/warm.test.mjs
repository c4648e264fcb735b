// The page's warm-up (web/warm.js): its batch must be accepted, so every
// line runs the whole fast path (a rejected line would leave the rest of the
// acceptor cold); its schema must hold every value type of the schema
// language, so the functions a user's schema needs are among those warmed;
// its buffer for the module's memory must be refused unread.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { WARM_BYTES, WARM_MEMORY_CAP, WARM_OPTIONS, WARM_SCHEMA, warmBatch, warmUp } from '../warm.js';

const require = createRequire(import.meta.url);
const pkg = require('../pkg/nodejs/validate.js');

test('the warm-up batch is accepted, every table has rows and it is the same bytes every time', () => {
  const report = JSON.parse(warmUp(pkg.compileSchema, WARM_MEMORY_CAP).report);
  assert.equal(report.ok, true, JSON.stringify(report.errors.slice(0, 3)));
  assert.equal(report.error_count, 0);
  const rows = Object.fromEntries(report.stats.tables.map((t) => [t.name, t.rows]));
  for (const table of ['Sensor', 'Site', 'Feeds', 'LocatedAt']) assert.ok(rows[table] > 0, `${table}: ${rows[table]}`);
  const batch = warmBatch(WARM_BYTES);
  assert.ok(batch.length >= WARM_BYTES && batch.length < WARM_BYTES + 4096, `${batch.length} bytes`);
  assert.deepEqual(warmBatch(WARM_BYTES), batch);
  // Nulls and absent members both occur (the explainer-free paths for each).
  const text = new TextDecoder().decode(batch);
  assert.match(text, /"count":null/);
  assert.match(text, /"on":(true|false),"total"/);
});

test('the buffer that maps the module\'s memory is one byte over the host\'s bound (capped) and refused before it is read', () => {
  for (const [hostBound, mapped] of [[4 << 20, 4 << 20], [1 << 30, WARM_MEMORY_CAP]]) {
    const memory = JSON.parse(warmUp(pkg.compileSchema, hostBound).memory);
    assert.equal(memory.ok, false);
    assert.deepEqual(memory.errors.map((e) => e.code), ['batch_bytes_limit']);
    assert.equal(memory.stats.lines, 0);
    assert.equal(memory.stats.bytes, mapped + 1);
  }
});

test('the warm-up schema has every value type, nullable and not, and the annotations the fast path checks', () => {
  const compiled = pkg.compileSchema(WARM_SCHEMA);
  const catalog = JSON.parse(compiled.catalog);
  compiled.free();
  const properties = [...catalog.nodes, ...catalog.edges].flatMap((t) => t.properties);
  const types = new Set(properties.map((p) => p.type.replace(/^enum\(.*\)$/, 'enum').replace(/^Vector\(\d+\)$/, 'Vector')));
  const every = ['String', 'Bool', 'I32', 'I64', 'U32', 'U64', 'F32', 'F64', 'Date', 'DateTime', 'Blob', 'Vector', 'enum', '[String]', '[I64]'];
  assert.deepEqual(every.filter((t) => !types.has(t)), []);
  assert.ok(properties.some((p) => p.nullable) && properties.some((p) => !p.nullable));
  const sensor = catalog.nodes.find((t) => t.name === 'Sensor');
  assert.deepEqual([sensor.key.length > 0, sensor.unique.length, sensor.ranges.length, sensor.checks.length], [true, 1, 1, 1]);
  assert.ok(catalog.edges.some((e) => e.card), 'an edge with @card');
  assert.equal(JSON.parse(WARM_OPTIONS).mode, 'merge');
});
