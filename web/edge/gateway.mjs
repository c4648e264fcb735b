// The edge gateway: validates strict loads with the same wasm validator the
// host runs (the `nodejs` build of @omnigraph/validate) and turns a bad batch
// away with 422 before it costs the host anything. Good batches, and every
// other request, go to the host unchanged (method, path, query, headers,
// body); the host's answer streams back. Node's standard library only, and no
// `eval`/`new Function`, so it runs where edge runtimes forbid them.
//
//   HOST_URL=http://127.0.0.1:8080 PORT=8081 node web/edge/gateway.mjs

import { createServer, request as httpRequest } from 'node:http';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const validator = require('../pkg/nodejs/validate.js');
const ARTIFACT_SHA256 = createHash('sha256')
  .update(readFileSync(new URL('../pkg/nodejs/validate_bg.wasm', import.meta.url)))
  .digest('hex');

/** How long a graph's schema and rules are trusted before they are fetched again. */
const SCHEMA_TTL_MS = 30_000;
/** How long the host's "this token may load into this graph" is trusted (option `accessTtlMs`). */
const DEFAULT_ACCESS_TTL_MS = 5_000;
/** Grants remembered at once; past it the memory is dropped and the host asked again. */
const MAX_REMEMBERED_GRANTS = 10_000;
const LOAD_ROUTE = /^\/graphs\/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\/load\/ndjson$/;
/** Hop-by-hop headers are never forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer']);

function json(res, status, body, headers = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function forwardedHeaders(headers, length) {
  const out = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!HOP_BY_HOP.has(name)) out[name] = value;
  }
  if (length !== undefined) out['content-length'] = String(length);
  return out;
}

/** GET a JSON document from the host, with the caller's credentials. */
function fetchJson(hostUrl, path, authorization) {
  return new Promise((resolve, reject) => {
    const url = new URL(path, hostUrl);
    const req = httpRequest(url, { method: 'GET', headers: authorization ? { authorization } : {} }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode, body: text ? JSON.parse(text) : null, headers: res.headers });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Proxies one request to the host; `body` is a Buffer, or undefined to stream `req`. */
function proxy(hostUrl, req, res, body) {
  const url = new URL(req.url, hostUrl);
  const upstream = httpRequest(url, { method: req.method, headers: forwardedHeaders(req.headers, body?.length) }, (answer) => {
    res.writeHead(answer.statusCode, forwardedHeaders(answer.headers));
    answer.pipe(res);
  });
  upstream.on('error', (e) => {
    if (!res.headersSent) json(res, 502, { error: `the host is unreachable: ${e.code ?? e.message}`, code: 'bad_gateway' });
    else res.destroy();
  });
  if (body === undefined) req.pipe(upstream);
  else upstream.end(body);
}

/** Reads the body up to `limit` bytes; resolves null once it runs over. */
function readBounded(req, limit) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > limit) {
        req.pause();
        resolve(null);
      } else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export function createGateway({ hostUrl, accessTtlMs = DEFAULT_ACCESS_TTL_MS }) {
  /** graph id → {expires, compiled, rules, hash} */
  const cache = new Map();
  /** graph id + token digest → when the host's grant of `change` stops being trusted */
  const granted = new Map();

  /**
   * Asks the host whether the caller may load into the graph, before the
   * gateway validates or answers anything: a caller without a valid token
   * gets the host's own 401/403, never a report. Grants are remembered per
   * token digest (never the token) for `accessTtlMs`; refusals are not.
   */
  async function authorize(id, authorization) {
    const key = `${id}\n${createHash('sha256').update(authorization ?? '').digest('hex')}`;
    if ((granted.get(key) ?? 0) > Date.now()) return { ok: true };
    const answer = await fetchJson(hostUrl, `/graphs/${id}/access?permission=change`, authorization);
    if (answer.status !== 204) return { ok: false, answer };
    if (granted.size >= MAX_REMEMBERED_GRANTS) granted.clear();
    granted.set(key, Date.now() + accessTtlMs);
    return { ok: true };
  }

  async function graphRules(id, authorization) {
    const hit = cache.get(id);
    if (hit && hit.expires > Date.now()) return { ok: true, entry: hit };
    const [schema, rules] = await Promise.all([
      fetchJson(hostUrl, `/graphs/${id}/schema`, authorization),
      fetchJson(hostUrl, `/graphs/${id}/rules`, authorization),
    ]);
    if (schema.status !== 200 || rules.status !== 200) {
      // Auth, unknown graph, …: the host's own answer is the right one.
      return { ok: false };
    }
    if (rules.body.validator_sha256 !== ARTIFACT_SHA256) {
      // Another validator build: only the host can judge; never guess.
      console.warn(`gateway: graph ${id}: host validator ${rules.body.validator_sha256} differs from ours ${ARTIFACT_SHA256}; forwarding unchecked`);
      return { ok: false };
    }
    const entry = {
      expires: Date.now() + SCHEMA_TTL_MS,
      compiled: validator.compileSchema(schema.body.source),
      bounds: rules.body.bounds,
      legacyIdentity: rules.body.legacy_identity === true,
    };
    cache.set(id, entry);
    return { ok: true, entry };
  }

  async function handleLoad(id, req, res) {
    let access;
    try {
      access = await authorize(id, req.headers.authorization);
    } catch (e) {
      return json(res, 502, { error: `the host is unreachable: ${e.code ?? e.message}`, code: 'bad_gateway' });
    }
    if (!access.ok) {
      const { status, body, headers } = access.answer;
      const retry = headers['retry-after'] ? { 'retry-after': headers['retry-after'] } : {};
      return json(res, status, body ?? { error: `the host answered ${status}`, code: 'refused' }, { connection: 'close', ...retry });
    }
    let rules;
    try {
      rules = await graphRules(id, req.headers.authorization);
    } catch (e) {
      return json(res, 502, { error: `the host is unreachable: ${e.code ?? e.message}`, code: 'bad_gateway' });
    }
    if (!rules.ok) return proxy(hostUrl, req, res);
    const limit = rules.entry.bounds.max_batch_bytes;
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      return json(res, 413, { error: `the body exceeds ${limit} bytes`, code: 'batch_bytes_limit', details: { resource: 'batch_bytes', limit, actual: declared } }, { connection: 'close' });
    }
    const body = await readBounded(req, limit);
    if (body === null) {
      return json(res, 413, { error: `the body exceeds ${limit} bytes`, code: 'batch_bytes_limit', details: { resource: 'batch_bytes', limit, actual: limit + 1 } }, { connection: 'close' });
    }
    const mode = new URL(req.url, 'http://gateway').searchParams.get('mode') ?? 'merge';
    let report;
    try {
      // The host's own bounds and identity rule: the same verdict as the host.
      const options = { mode, limits: rules.entry.bounds, legacy_identity: rules.entry.legacyIdentity };
      report = JSON.parse(rules.entry.compiled.validate(body, JSON.stringify(options)));
    } catch {
      // An options error (e.g. an unknown mode): the host words it.
      return proxy(hostUrl, req, res, body);
    }
    if (!report.ok) {
      const bound = report.errors.find((e) => e.limit);
      if (bound) {
        return json(res, 413, { error: bound.message, code: bound.code, details: { ...bound.limit, report } });
      }
      return json(res, 422, { error: 'the batch failed validation', code: 'validation_failed', details: { report } });
    }
    return proxy(hostUrl, req, res, body);
  }

  return createServer((req, res) => {
    const path = req.url.split('?')[0];
    const load = req.method === 'POST' && LOAD_ROUTE.exec(path);
    if (load) {
      const contentType = (req.headers['content-type'] ?? '').split(';')[0].trim();
      if (contentType === 'application/x-ndjson') {
        handleLoad(load[1], req, res).catch((e) => json(res, 500, { error: String(e), code: 'gateway_error' }));
        return;
      }
    }
    proxy(hostUrl, req, res);
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const hostUrl = process.env.HOST_URL ?? 'http://127.0.0.1:8080';
  const port = Number(process.env.PORT ?? 8081);
  createGateway({ hostUrl }).listen(port, '127.0.0.1', () => {
    console.log(`edge gateway on http://127.0.0.1:${port} in front of ${hostUrl} (validator sha256 ${ARTIFACT_SHA256})`);
  });
}
