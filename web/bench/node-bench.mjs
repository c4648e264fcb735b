// Node throughput of the nodejs package on a batch file, and the cost of the
// report crossing the boundary as a string vs as an object.
// Usage: node web/bench/node-bench.mjs BATCH.ndjson OPTIONS.json
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { ROOT } from '../test/corpus.mjs';

const require = createRequire(import.meta.url);
const pkg = require('../pkg/nodejs/validate.js');
const [batchPath, optionsPath] = process.argv.slice(2);
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
  const first = times[0];
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  console.log(`${label}: median ${median.toFixed(1)} ms, ${(bytes / 1048576 / (median / 1000)).toFixed(1)} MiB/s (first call ${first.toFixed(1)} ms, fastest ${times[0].toFixed(1)} ms, of ${runs})`);
}

time('node validate 32MiB', batch.length, 5, () => schema.validate(batch, options));

// A batch whose report is large: every line has an error, all errors listed.
const bad = new TextEncoder().encode(
  Array.from({ length: 50_000 }, (_, i) => `{"type":"Company","data":{"name":"c${i}","employees":"many"}}`).join('\n') + '\n');
const allErrors = '{"max_errors":100000}';
const reportBytes = schema.validate(bad, allErrors).length;
console.log(`report of ${reportBytes} bytes (50,000 errors):`);
time('  as string + JSON.parse in JS', bad.length, 7, () => JSON.parse(schema.validate(bad, allErrors)));
time('  as object (JSON.parse inside the module)', bad.length, 7, () => schema.validateObject(bad, allErrors));
