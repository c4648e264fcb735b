// Parity in Node: the nodejs package gives every corpus report byte for byte.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { test } from 'node:test';
import { ARTIFACT_SHA256, EXPECTED_IMPORTS, ROOT, caseNames, mismatches, readCase, sha256Hex } from './corpus.mjs';

const require = createRequire(import.meta.url);
const pkg = require('../pkg/nodejs/validate.js');
const wasmBytes = readFileSync(path.join(ROOT, 'web/pkg/nodejs/validate_bg.wasm'));

test('node loads the artifact with the recorded SHA-256', () => {
  assert.equal(sha256Hex(wasmBytes), ARTIFACT_SHA256);
});

test('the module imports only the known wasm-bindgen glue', () => {
  const imports = WebAssembly.Module.imports(new WebAssembly.Module(wasmBytes));
  assert.deepEqual(imports, EXPECTED_IMPORTS);
});

test('every corpus report is byte-identical in node', () => {
  const reports = {};
  for (const name of caseNames()) {
    const c = readCase(name);
    const schema = pkg.compileSchema(c.schema);
    reports[name] = schema.validate(c.input, c.options) + '\n';
    schema.free();
  }
  assert.deepEqual(mismatches('node', reports), []);
});

test('one compiled schema gives every batch of its cases its own report, whatever it validated before', () => {
  // Cases that share a schema, through one CompiledSchema (which keeps its
  // scratch memory between batches), forwards then backwards.
  const bySchema = new Map();
  for (const name of caseNames()) {
    const c = readCase(name);
    bySchema.set(c.schema, [...(bySchema.get(c.schema) ?? []), { name, ...c }]);
  }
  const shared = [...bySchema.values()].filter((cases) => cases.length > 1);
  assert.ok(shared.reduce((n, cases) => n + cases.length, 0) >= 20, 'many cases share a schema');
  for (const cases of shared) {
    const schema = pkg.compileSchema(cases[0].schema);
    for (const c of [...cases, ...cases.slice().reverse()]) {
      assert.equal(schema.validate(c.input, c.options) + '\n', c.expected, c.name);
    }
    schema.free();
  }
});

test('validateObject gives the same report as an object', () => {
  const c = readCase(caseNames()[0]);
  const schema = pkg.compileSchema(c.schema);
  assert.deepEqual(schema.validateObject(c.input, c.options), JSON.parse(c.expected));
  schema.free();
});

test('a bad schema throws a typed error with line and column', () => {
  assert.throws(
    () => pkg.compileSchema('node P {\n  a: Strin\n}'),
    (e) => e instanceof pkg.SchemaCompileError && e.line === 2 && e.column === 6 && /Strin/.test(e.message),
  );
});

test('bad options throw', () => {
  const schema = pkg.compileSchema('node P { a: String }');
  assert.throws(() => schema.validate(new Uint8Array(), '{"mode":"sideways"}'), /invalid options/);
  schema.free();
});

test('rules names the validator and ABI versions', () => {
  assert.deepEqual(pkg.rules(), { validator_version: '0.1.0', abi_version: 4 });
});
