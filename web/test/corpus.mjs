// The conformance corpus (tests/vectors) and the artifact's expected facts,
// read once for every JavaScript runtime's tests.
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const VECTORS = path.join(ROOT, 'tests/vectors');

export function caseNames() {
  return readdirSync(VECTORS)
    .filter((n) => statSync(path.join(VECTORS, n)).isDirectory())
    .sort();
}

export function readCase(name) {
  const dir = path.join(VECTORS, name);
  return {
    schema: readFileSync(path.join(dir, 'schema.pg'), 'utf8'),
    options: readFileSync(path.join(dir, 'options.json'), 'utf8'),
    input: new Uint8Array(readFileSync(path.join(dir, 'input.ndjson'))),
    expected: readFileSync(path.join(dir, 'report.json'), 'utf8'),
  };
}

/** The SHA-256 that scripts/build-wasm.sh recorded for the artifact. */
export const ARTIFACT_SHA256 = readFileSync(path.join(ROOT, 'web/pkg/validate_bg.wasm.sha256'), 'utf8').trim();

/** The only imports the module may have: wasm-bindgen's own glue. */
export const EXPECTED_IMPORTS = JSON.parse(readFileSync(path.join(ROOT, 'tests/wasm-imports.json'), 'utf8'));

export function sha256Hex(bytes) {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Compares reports with the corpus; returns one line per mismatch, naming case and runtime. */
export function mismatches(runtime, reports) {
  const out = [];
  for (const name of caseNames()) {
    const { expected } = readCase(name);
    if (reports[name] !== expected) {
      out.push(`${runtime}: ${name}\n  expected ${expected.trim()}\n  actual   ${String(reports[name]).trim()}`);
    }
  }
  return out;
}
