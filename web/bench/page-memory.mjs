// Memory of the upload page while it validates a large file: headless
// Chromium against a real host (`serve --open`, default bounds), the page
// validating a generated SMALL-MB and a LARGE-MB file, each in a fresh
// browser. Reports the renderer's peak RSS (VmHWM: the page's and the
// Worker's JS heaps, their ArrayBuffers and the validator's wasm memory, all
// in that one process; Chromium exposes no worker heap figure to pages),
// then the ratio large/small: memory is one batch, so the ratio stays near 1
// however large the file.
//
//   node web/bench/page-memory.mjs [SMALL_MB=50] [LARGE_MB=200]
//
// Exits 1 when a target is not met (scripts/test.sh runs it).
import { execFileSync } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch } from '../test/browser.mjs';
import { HOST_BIN, startHost } from '../test/host.mjs';

const [smallMb = 50, largeMb = 200] = process.argv.slice(2).map(Number);
/** Goal: validating the large file peaks at most this much above the small one. */
const MAX_PEAK_RATIO = 1.5;
const SAMPLES = new URL('../../samples/', import.meta.url).pathname;

/** Writes about `mb` MiB of people and edges between them, streamed. */
async function writePeople(path, mb) {
  const out = createWriteStream(path);
  let written = 0;
  for (let i = 0; written < mb * 1048576; i++) {
    let chunk = '';
    for (let j = 0; j < 1000; j++) {
      const n = i * 1000 + j;
      chunk += `{"type":"Person","data":{"name":"person-${n}","age":${n % 100},"email":"p${n}@example.org"}}\n`;
      if (n % 2 === 1) chunk += `{"edge":"Knows","id":"knows-${n}","from":"person-${n}","to":"person-${n - 1}"}\n`;
    }
    written += Buffer.byteLength(chunk);
    if (!out.write(chunk)) await new Promise((resolve) => out.once('drain', resolve));
  }
  await new Promise((resolve) => out.end(resolve));
}

/** Chromium's renderer processes (the page and its Worker live in one). */
function rendererPids() {
  return readdirSync('/proc').filter((p) => /^\d+$/.test(p)).filter((pid) => {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      return cmd.includes('chromium') && cmd.includes('--type=renderer');
    } catch {
      return false;
    }
  });
}

const peakKib = (pid) => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);

async function measure(hostUrl, file) {
  const browser = await launch();
  try {
    const page = await browser.context.newPage();
    await page.goto(`${hostUrl}/?graph=g`);
    await page.waitForFunction(() => document.getElementById('rules').textContent.includes('same build as the host'), null, { timeout: 60_000 });
    const started = Date.now();
    await page.setInputFiles('#file', file);
    await page.waitForFunction(() => /is valid\.|error\(s\)|failed/.test(document.getElementById('status').textContent), null, { timeout: 900_000, polling: 500 });
    const seconds = (Date.now() - started) / 1000;
    const status = await page.textContent('#status');
    if (!/is valid\./.test(status)) throw new Error(`the generated file was not valid: ${status}`);
    const summary = await page.textContent('#summary');
    const peak = Math.max(...rendererPids().map(peakKib)) / 1024;
    return { peak, seconds, batches: /in (\d+) batches/.exec(summary)?.[1] };
  } finally {
    await browser.close();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'omnigraph-page-memory-'));
let host, hostUrl;
try {
  execFileSync(HOST_BIN, ['init', '--root', join(dir, 'graphs', 'g'), join(SAMPLES, 'people.pg')], { stdio: 'ignore' });
  ({ url: hostUrl, process: host } = await startHost(['--root', join(dir, 'graphs'), '--open']));
  const results = {};
  for (const mb of [smallMb, largeMb]) {
    const file = join(dir, `people-${mb}.ndjson`);
    await writePeople(file, mb);
    results[mb] = await measure(hostUrl, file);
    rmSync(file);
    const r = results[mb];
    console.log(`page validates ${mb} MiB (${r.batches} batches) in ${r.seconds.toFixed(1)} s: renderer peak RSS ${r.peak.toFixed(0)} MiB`);
  }
  const ratio = results[largeMb].peak / results[smallMb].peak;
  const met = ratio <= MAX_PEAK_RATIO;
  console.log(`target page_peak_rss_${largeMb}mb_vs_${smallMb}mb ${ratio.toFixed(2)} ${MAX_PEAK_RATIO} ${met ? 'met' : 'not met'}`);
  process.exitCode = met ? 0 : 1;
} finally {
  host?.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}
