// Validates a batch N times with the nodejs package and exits 1 unless the
// last report is ok: for scripts/count-wasm.sh, which counts V8's
// instructions under cachegrind as it counts wasmtime's (1 and 1+N calls).
// Usage: node web/bench/validate-n.mjs SCHEMA.pg BATCH.ndjson OPTIONS.json N
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const pkg = require('../pkg/nodejs/validate.js');
const [schemaPath, batchPath, optionsPath, callsArg] = process.argv.slice(2);
const calls = Number(callsArg);
if (!(calls > 0)) {
  console.error('usage: validate-n.mjs SCHEMA.pg BATCH.ndjson OPTIONS.json N (N > 0)');
  process.exit(2);
}
const schema = pkg.compileSchema(readFileSync(schemaPath, 'utf8'));
const batch = new Uint8Array(readFileSync(batchPath));
const options = readFileSync(optionsPath, 'utf8');
let report;
for (let i = 0; i < calls; i++) report = schema.validate(batch, options);
process.exit(report.startsWith('{"ok":true') ? 0 : 1);
