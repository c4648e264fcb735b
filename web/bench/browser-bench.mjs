// Chromium throughput of the web package on a batch file, each in a fresh
// browser, in a page served from 127.0.0.1 (as the host serves it:
// `no-cache`, ETags): cold (the first call is the module's first work), as
// the upload page's Worker runs it (web/warm.js first, then a pause for the
// user to pick a file), and both again on a returning visit (a browser on
// the profile of an earlier one that loaded the module and warmed it as the
// page does, so V8's code cache holds its optimised code). Five calls per browser; ROUNDS
// browsers of each kind, alternated: a first call happens once per
// browser, so its figure is the median over the rounds (each printed too).
// Each browser is followed by a native run (web/bench/native.mjs), and the
// first call's ratio to it is taken per browser.
// Usage: node web/bench/browser-bench.mjs BATCH.ndjson OPTIONS.json [PAUSE_MS] [ROUNDS]
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { VALIDATOR_PATH } from '../load.js';
import { launch, wasmCodeCached } from '../test/browser.mjs';
import { serve } from '../test/serve.mjs';
import { median, nativeMs, pairedLine } from './native.mjs';

const [batchPath, optionsPath, pauseArg, roundsArg] = process.argv.slice(2);
const batch = readFileSync(batchPath);
const options = readFileSync(optionsPath, 'utf8');
const maxBatchBytes = JSON.parse(options).limits.max_batch_bytes;
// Far less than a person takes to choose a file after the page opens.
const pauseMs = Number(pauseArg ?? 1000);
const rounds = Number(roundsArg ?? 3);
const http = await serve({ '/bench-batch': ['application/x-ndjson', batch] });

/** Far more than V8 took to store the code after a warm-up (at most ~50 s seen). */
const CACHE_WRITE_TIMEOUT_MS = 180_000;

/**
 * A first visit on `profile`, as the upload page makes it: the module
 * loaded by the page's code (web/load.js: compiled by streaming), then
 * warmed in the page's Worker (web/worker.js);
 * waits for V8 to store its code (with Chromium's defaults, as a user's
 * browser: 2 to 50 s after the warm-up here; see CACHE_AT_ONCE).
 */
async function visit(profile) {
  const browser = await launch({ profile });
  try {
    const page = await browser.context.newPage();
    await page.goto(`${http.origin}/web/bench/bench.html`);
    await page.evaluate(async (maxBatchBytes) => {
      const { loadValidator } = await import('/web/load.js');
      const { module } = await loadValidator();
      const worker = new Worker('/web/worker.js', { type: 'module' });
      await new Promise((resolve, reject) => {
        worker.onmessage = ({ data }) => {
          if (data.kind === 'warmed') (data.failed ? reject(new Error(data.failed)) : resolve());
        };
        worker.postMessage({ kind: 'init', module, maxBatchBytes });
      });
    }, maxBatchBytes);
    if (!(await wasmCodeCached(profile, CACHE_WRITE_TIMEOUT_MS))) throw new Error('the first visit left no code in the code cache');
  } finally {
    await browser.close();
  }
}

/**
 * One browser's five calls: `kind` is cold, warm (the page's warm-up first),
 * revisit (cold, on a profile that visited) or revisit-page (the page's
 * warm-up first, on a profile that visited).
 */
async function run(kind) {
  const warm = kind === 'warm' || kind === 'revisit-page';
  const profile = kind.startsWith('revisit') ? await mkdtemp(path.join(os.tmpdir(), 'omnigraph-revisit-')) : undefined;
  let browser = null;
  try {
    if (profile) await visit(profile);
    browser = await launch({ profile });
    const page = await browser.context.newPage();
    await page.goto(`${http.origin}/web/bench/bench.html`);
    return await page.evaluate(async ({ opts, warm, pauseMs, maxBatchBytes, artifact }) => {
      const { default: init, compileSchema } = await import('/web/pkg/web/validate.js');
      await init({ module_or_path: artifact });
      let warmMs = null;
      if (warm) {
        const { warmUp } = await import('/web/warm.js');
        const t = performance.now();
        warmUp(compileSchema, maxBatchBytes);
        warmMs = performance.now() - t;
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
      const schemaText = await (await fetch('/tests/bench/schema.pg')).text();
      const bytes = new Uint8Array(await (await fetch('/bench-batch')).arrayBuffer());
      const schema = compileSchema(schemaText);
      const times = [];
      for (let i = 0; i < 5; i++) {
        const t = performance.now();
        schema.validate(bytes, opts);
        times.push(performance.now() - t);
      }
      return { times, warmMs };
    }, { opts: options, warm, pauseMs, maxBatchBytes, artifact: VALIDATOR_PATH });
  } finally {
    await browser?.close();
    if (profile) await rm(profile, { recursive: true, force: true });
  }
}

const mibs = (ms) => (batch.length / 1048576 / (ms / 1000)).toFixed(1);
const line = (label, first, typical) =>
  `${label}: first ${first.toFixed(1)} ms (${mibs(first)} MiB/s), median ${typical.toFixed(1)} ms (${mibs(typical)} MiB/s)`;

try {
  const results = { cold: [], warm: [], revisit: [], 'revisit-page': [] };
  const ratios = { cold: [], warm: [], revisit: [], 'revisit-page': [] };
  for (let round = 1; round <= rounds; round++) {
    for (const kind of Object.keys(results)) {
      const result = await run(kind);
      results[kind].push(result);
      const label = result.warmMs === null ? kind : `${kind === 'warm' ? '' : 'revisit, '}warm-up ${result.warmMs.toFixed(1)} ms`;
      const native = nativeMs(batchPath, optionsPath);
      const paired = native === null ? '' : `; native median ${native.toFixed(1)} ms`;
      if (native !== null) ratios[kind].push(native / result.times[0]);
      console.log(line(`  round ${round}, ${label}`, result.times[0], median(result.times)) + paired);
    }
  }
  for (const [kind, runs] of Object.entries(results)) {
    const warmUp = () => `the page's warm-up (median ${median(runs.map((r) => r.warmMs)).toFixed(1)} ms, then ${pauseMs} ms)`;
    const label = {
      cold: () => 'cold',
      warm: () => `after ${warmUp()}`,
      revisit: () => 'cold on a returning visit (code from the code cache)',
      'revisit-page': () => `on a returning visit after ${warmUp()}`,
    }[kind]();
    console.log(line(`chromium validate 32MiB ${label}, medians of ${rounds} browsers`, median(runs.map((r) => r.times[0])), median(runs.map((r) => median(r.times)))));
  }
  if (ratios.cold.length) {
    console.log(pairedLine('chromium_cold_first_call_vs_native', ratios.cold));
    console.log(pairedLine('chromium_page_first_call_vs_native', ratios.warm));
    console.log(pairedLine('chromium_revisit_cold_first_call_vs_native', ratios.revisit));
    console.log(pairedLine('chromium_revisit_page_first_call_vs_native', ratios['revisit-page']));
  }
} finally {
  http.server.close();
}
