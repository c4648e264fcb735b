// scripts/count-loops.sh's runner: validates BATCH once with the
// instrumented artifact in DIR (the nodejs package's glue beside
// wasm-loop-count's output) and prints how often each function entry and
// loop header ran (SITES.tsv names them), the TOP sites first.
// Usage: node count.mjs DIR SITES.tsv SCHEMA.pg BATCH OPTIONS.json [TOP]
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';

const [dir, sitesPath, schemaPath, batchPath, optionsPath, topArg] = process.argv.slice(2);
const top = Number(topArg ?? 30);

// The glue keeps its instance to itself: catch it as it is made.
let instance;
const Instance = WebAssembly.Instance;
WebAssembly.Instance = function (module, imports) {
  instance = new Instance(module, imports);
  return instance;
};
const validator = createRequire(import.meta.url)(path.resolve(dir, 'validate.js'));

const sites = readFileSync(sitesPath, 'utf8').trim().split('\n').map((line) => {
  const [n, name, place] = line.split('\t');
  return { counter: instance.exports[`count_${n}`], name: name.replace(/::h[0-9a-f]{16}$/, ''), place };
});
const schema = validator.compileSchema(readFileSync(schemaPath, 'utf8'));
const batch = readFileSync(batchPath);
const options = readFileSync(optionsPath, 'utf8');
const before = sites.map((s) => s.counter.value);
const report = schema.validate(batch, options);
if (!report.startsWith('{"ok":true')) throw new Error(`the batch did not validate: ${report.slice(0, 200)}`);
const runs = sites.map((s, i) => ({ ...s, count: Number(s.counter.value - before[i]) })).filter((s) => s.count > 0);

const sum = (list) => list.reduce((total, s) => total + s.count, 0);
const entries = sum(runs.filter((s) => s.place === 'entry'));
const loops = sum(runs) - entries;
const perByte = (n) => (n / batch.length).toFixed(3);
console.log(`one validation of ${batch.length} bytes: ${entries + loops} epoch checks (${perByte(entries + loops)} per byte):`);
console.log(`  ${entries} function entries (${perByte(entries)} per byte), ${loops} loop turns (${perByte(loops)} per byte)`);
console.log(`the ${top} sites that ran most:`);
for (const s of runs.sort((a, b) => b.count - a.count).slice(0, top)) {
  console.log(`${String(s.count).padStart(12)}  ${s.place.padEnd(8)} ${s.name}`);
}
