// Chromium throughput of the web package on a batch file, each in a fresh
// browser, in a page served from 127.0.0.1: cold (the first call is the
// module's first work) and as the upload page's Worker runs it (web/warm.js
// first, then a pause for the user to pick a file). Five calls per browser;
// ROUNDS browsers of each kind, alternated: a first call happens once per
// browser, so its figure is the median over the rounds (each printed too).
// Each browser is followed by a native run (web/bench/native.mjs), and the
// first call's ratio to it is taken per browser.
// Usage: node web/bench/browser-bench.mjs BATCH.ndjson OPTIONS.json [PAUSE_MS] [ROUNDS]
import { readFileSync } from 'node:fs';
import { launch } from '../test/browser.mjs';
import { serve } from '../test/serve.mjs';
import { median, nativeMs, pairedLine } from './native.mjs';

const [batchPath, optionsPath, pauseArg, roundsArg] = process.argv.slice(2);
const batch = readFileSync(batchPath);
const options = readFileSync(optionsPath, 'utf8');
// Far less than a person takes to choose a file after the page opens.
const pauseMs = Number(pauseArg ?? 1000);
const rounds = Number(roundsArg ?? 3);
const http = await serve({ '/bench-batch': ['application/x-ndjson', batch] });

async function run(warm) {
  const browser = await launch();
  try {
    const page = await browser.context.newPage();
    await page.goto(`${http.origin}/web/bench/bench.html`);
    return await page.evaluate(async ({ opts, warm, pauseMs, maxBatchBytes }) => {
      const { default: init, compileSchema } = await import('/web/pkg/web/validate.js');
      await init({ module_or_path: '/web/pkg/web/validate_bg.wasm' });
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
    }, { opts: options, warm, pauseMs, maxBatchBytes: JSON.parse(options).limits.max_batch_bytes });
  } finally {
    await browser.close();
  }
}

const mibs = (ms) => (batch.length / 1048576 / (ms / 1000)).toFixed(1);
const line = (label, first, typical) =>
  `${label}: first ${first.toFixed(1)} ms (${mibs(first)} MiB/s), median ${typical.toFixed(1)} ms (${mibs(typical)} MiB/s)`;

try {
  const results = { cold: [], warm: [] };
  const ratios = { cold: [], warm: [] };
  for (let round = 1; round <= rounds; round++) {
    for (const warm of [false, true]) {
      const kind = warm ? 'warm' : 'cold';
      const result = await run(warm);
      results[kind].push(result);
      const label = warm ? `warm-up ${result.warmMs.toFixed(1)} ms` : 'cold';
      const native = nativeMs(batchPath, optionsPath);
      const paired = native === null ? '' : `; native median ${native.toFixed(1)} ms`;
      if (native !== null) ratios[kind].push(native / result.times[0]);
      console.log(line(`  round ${round}, ${label}`, result.times[0], median(result.times)) + paired);
    }
  }
  for (const [kind, runs] of Object.entries(results)) {
    const label = kind === 'warm' ? `after the page's warm-up (median ${median(runs.map((r) => r.warmMs)).toFixed(1)} ms, then ${pauseMs} ms)` : 'cold';
    console.log(line(`chromium validate 32MiB ${label}, medians of ${rounds} browsers`, median(runs.map((r) => r.times[0])), median(runs.map((r) => median(r.times)))));
  }
  if (ratios.cold.length) {
    console.log(pairedLine('chromium_cold_first_call_vs_native', ratios.cold));
    console.log(pairedLine('chromium_page_first_call_vs_native', ratios.warm));
  }
} finally {
  http.server.close();
}
