// The edge gateway on Node: a node:http adapter around the fetch handler in
// gateway.mjs. The validator is compiled from web/pkg/web/validate_bg.wasm
// (VALIDATOR_WASM overrides the path) and its SHA-256 is measured from those
// bytes. Request and answer bodies are streamed both ways.
//
//   HOST_URL=http://127.0.0.1:8080 PORT=8081 node web/edge/node.mjs
//
// env: HOST_URL (required), PORT (default 8081; 0 picks one), LISTEN_HOST
// (default 127.0.0.1), ACCESS_TTL_MS, VALIDATOR_WASM, VALIDATOR_SHA256 (a
// declared digest that must then match the bytes). It prints one line
// "edge gateway on http://HOST:PORT …" once it listens.

import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import gateway, { DEFAULT_ACCESS_TTL_MS } from './gateway.mjs';

export const DEFAULT_WASM = new URL('../pkg/web/validate_bg.wasm', import.meta.url);

/**
 * The gateway as a node:http server (not yet listening), for code that embeds
 * it: createGateway({hostUrl, accessTtlMs}).listen(port, host).
 */
export function createGateway({ hostUrl, accessTtlMs = DEFAULT_ACCESS_TTL_MS, wasm = DEFAULT_WASM, validatorSha256 } = {}) {
  const { module, bytes } = validatorModule(wasm);
  const env = {
    HOST_URL: hostUrl,
    ACCESS_TTL_MS: String(accessTtlMs),
    VALIDATOR: module,
    VALIDATOR_BYTES: bytes,
    ...(validatorSha256 ? { VALIDATOR_SHA256: validatorSha256 } : {}),
  };
  return createServer((req, res) => {
    serve(env, req, res).catch((e) => {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: String(e?.message ?? e), code: 'gateway_error' }));
      } else res.destroy(e);
    });
  });
}

/**
 * The validator glue holds one instance per process, so every gateway of a
 * process shares one compiled module (and a second artifact is refused).
 */
const modules = new Map();
export function validatorModule(wasm = DEFAULT_WASM) {
  const key = String(wasm);
  if (!modules.has(key)) {
    const bytes = readFileSync(wasm);
    modules.set(key, { module: new WebAssembly.Module(bytes), bytes });
  }
  return modules.get(key);
}

/** One node:http exchange through the fetch handler. */
async function serve(env, req, res) {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  const controller = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  const request = new Request(`http://${req.headers.host ?? 'gateway'}${req.url}`, {
    method: req.method,
    headers,
    body: hasBody ? Readable.toWeb(req) : undefined,
    duplex: 'half',
    signal: controller.signal,
  });
  const answer = await gateway.fetch(request, env);
  const out = [];
  for (const [name, value] of answer.headers) {
    if (name !== 'set-cookie') out.push(name, value);
  }
  for (const cookie of answer.headers.getSetCookie()) out.push('set-cookie', cookie);
  // An answer given before the body was read (401, 413, 502, …): close the
  // connection rather than drain a body nobody wants.
  if (hasBody && !req.complete) out.push('connection', 'close');
  res.writeHead(answer.status, answer.statusText || undefined, out);
  if (!answer.body || req.method === 'HEAD') {
    res.end();
    return;
  }
  await pipeline(Readable.fromWeb(answer.body), res);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const hostUrl = process.env.HOST_URL ?? 'http://127.0.0.1:8080';
  const hostname = process.env.LISTEN_HOST ?? '127.0.0.1';
  const server = createGateway({
    hostUrl,
    accessTtlMs: Number(process.env.ACCESS_TTL_MS ?? DEFAULT_ACCESS_TTL_MS),
    wasm: process.env.VALIDATOR_WASM ?? DEFAULT_WASM,
    validatorSha256: process.env.VALIDATOR_SHA256,
  });
  server.listen(Number(process.env.PORT ?? 8081), hostname, () => {
    console.log(`edge gateway on http://${hostname}:${server.address().port} in front of ${hostUrl} (node ${process.version})`);
  });
}
