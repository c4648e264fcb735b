// Chromium throughput of the web package on a batch file (first call and
// warm), in a page served from 127.0.0.1.
// Usage: node web/bench/browser-bench.mjs BATCH.ndjson OPTIONS.json
import { readFileSync } from 'node:fs';
import { launch } from '../test/browser.mjs';
import { serve } from '../test/serve.mjs';

const [batchPath, optionsPath] = process.argv.slice(2);
const batch = readFileSync(batchPath);
const options = readFileSync(optionsPath, 'utf8');
const http = await serve({ '/bench-batch': ['application/x-ndjson', batch] });
const browser = await launch();
try {
  const page = await browser.context.newPage();
  await page.goto(`${http.origin}/web/bench/bench.html`);
  const result = await page.evaluate(async (opts) => {
    const { default: init, compileSchema } = await import('/web/pkg/web/validate.js');
    await init({ module_or_path: '/web/pkg/web/validate_bg.wasm' });
    const schemaText = await (await fetch('/tests/bench/schema.pg')).text();
    const bytes = new Uint8Array(await (await fetch('/bench-batch')).arrayBuffer());
    const schema = compileSchema(schemaText);
    const times = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      schema.validate(bytes, opts);
      times.push(performance.now() - t);
    }
    return { bytes: bytes.length, times };
  }, options);
  const sorted = [...result.times].sort((a, b) => a - b);
  const mibs = (ms) => (result.bytes / 1048576 / (ms / 1000)).toFixed(1);
  console.log(`chromium validate 32MiB: first ${result.times[0].toFixed(1)} ms (${mibs(result.times[0])} MiB/s), median ${sorted[2].toFixed(1)} ms (${mibs(sorted[2])} MiB/s)`);
} finally {
  await browser.close();
  http.server.close();
}
