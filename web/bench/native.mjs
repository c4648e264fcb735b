// The native validator timed between a JS runtime's calls, so that each
// ratio compares runs seconds apart: on a shared machine whose speed swings
// 2x over minutes, a native figure from another part of the run says
// little. OMNIGRAPH_NATIVE_VALIDATE names the binary (scripts/bench-wasm.sh
// builds crates/omnigraph-validate-wasm's `validate` example in the profile
// of its wasmtime comparison); without it the JS benches print no ratios.
// It validates through one kept Scratch (`--scratch`), as a native service
// does: its calls after the first find their memory mapped, as a JS
// runtime's calls find the module's memory grown. In new memory each call,
// a native process alone paid ~12 % of page faults (glibc hands the freed
// state back to the kernel), which made every JS ratio look that much better.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { ROOT } from '../test/corpus.mjs';

const NATIVE_RUNS = 3;
const binary = process.env.OMNIGRAPH_NATIVE_VALIDATE;

export const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** The native median in ms on the same batch, or null when no binary is named. */
export function nativeMs(batchPath, optionsPath) {
  if (!binary) return null;
  const out = execFileSync(binary, [path.join(ROOT, 'tests/bench/schema.pg'), batchPath, optionsPath, '--time', String(NATIVE_RUNS), '--scratch'], {
    encoding: 'utf8',
  });
  const found = /native validate: median ([0-9.]+) ms/.exec(out);
  if (!found) throw new Error(`unexpected output of ${binary}: ${out}`);
  return Number(found[1]);
}

/** One line of paired ratios (native ms / JS ms per round) and their median. */
export function pairedLine(label, ratios) {
  return `${label}: paired ratio ${median(ratios).toFixed(2)} (rounds ${ratios.map((r) => r.toFixed(2)).join(', ')})`;
}
