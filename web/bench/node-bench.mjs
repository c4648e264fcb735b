// Node throughput of the nodejs package on a batch file, in ROUNDS rounds
// of five calls each followed by a native run (web/bench/native.mjs), and
// the cost of the report crossing the boundary as a string vs as an object.
// Usage: node web/bench/node-bench.mjs BATCH.ndjson OPTIONS.json [ROUNDS]
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ROOT } from '../test/corpus.mjs';
import { median, nativeMs, pairedLine } from './native.mjs';

const require = createRequire(import.meta.url);
const pkg = require('../pkg/nodejs/validate.js');
const [batchPath, optionsPath, roundsArg] = process.argv.slice(2);
const rounds = Number(roundsArg ?? 3);
const batch = new Uint8Array(readFileSync(batchPath));
const options = readFileSync(optionsPath, 'utf8');
const schema = pkg.compileSchema(readFileSync(path.join(ROOT, 'tests/bench/schema.pg'), 'utf8'));

function time(label, bytes, runs, fn) {
  const times = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    fn();
    times.push(performance.now() - t);
  }
  const typical = median(times);
  console.log(`${label}: median ${typical.toFixed(1)} ms, ${(bytes / 1048576 / (typical / 1000)).toFixed(1)} MiB/s (first call ${times[0].toFixed(1)} ms, fastest ${Math.min(...times).toFixed(1)} ms, of ${runs})`);
  return typical;
}

const nodeMs = [];
const ratios = [];
for (let round = 1; round <= rounds; round++) {
  const ms = time(`  round ${round}, node`, batch.length, 5, () => schema.validate(batch, options));
  nodeMs.push(ms);
  const native = nativeMs(batchPath, optionsPath);
  if (native !== null) {
    console.log(`  round ${round}, native median ${native.toFixed(1)} ms`);
    ratios.push(native / ms);
  }
}
const typical = median(nodeMs);
console.log(`node validate 32MiB: median ${typical.toFixed(1)} ms, ${(batch.length / 1048576 / (typical / 1000)).toFixed(1)} MiB/s (median of ${rounds} rounds)`);
if (ratios.length) console.log(pairedLine('node_vs_native', ratios));

// A batch whose report is large: every line has an error, all errors listed.
const bad = new TextEncoder().encode(
  Array.from({ length: 50_000 }, (_, i) => `{"type":"Company","data":{"name":"c${i}","employees":"many"}}`).join('\n') + '\n');
const allErrors = '{"max_errors":100000}';
const reportBytes = schema.validate(bad, allErrors).length;
console.log(`report of ${reportBytes} bytes (50,000 errors):`);
time('  as string + JSON.parse in JS', bad.length, 7, () => JSON.parse(schema.validate(bad, allErrors)));
time('  as object (JSON.parse inside the module)', bad.length, 7, () => schema.validateObject(bad, allErrors));
