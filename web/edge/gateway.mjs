// The edge gateway, one module for every runtime: a standard
// `fetch(request, env)` handler (`export default { fetch }`) that uses only
// web-standard APIs (fetch, Request, Response, crypto.subtle, streams) and no
// `eval`/`new Function`, so it runs in workerd / Cloudflare Workers, Deno and
// Node alike. The thin entries beside it (workerd.mjs + workerd.capnp,
// deno.mjs, node.mjs) only hand it the validator and the configuration.
//
// What it does, in order, for a strict load (POST /graphs/{id}/load/ndjson
// with Content-Type application/x-ndjson):
//   1. asks the host whether the caller may load (GET /graphs/{id}/access
//      ?permission=change with the caller's own Authorization): a refusal is
//      the host's own 401/403/404, and no report is ever given before this;
//   2. fetches the graph's schema and rules (cached SCHEMA_TTL_MS) and checks
//      that the host's validator_sha256 is the SHA-256 of its own artifact:
//      if not, it refuses to validate (503 validator_mismatch) rather than
//      apply other rules than the host's;
//   3. validates the batch with the `web` build of @omnigraph/validate and
//      the host's bounds: a bad batch is answered here (422 with the report,
//      413 for a bound) and the host's load route is never contacted (the
//      report's text is spliced in; an accepted report, `{"ok":true,…`, is
//      not parsed);
//   4. forwards a good batch unchanged and streams the host's answer back.
// Every other request is forwarded unchanged (method, path, query, headers,
// streamed body) and the answer streamed back; 502 when the host is down.
//
// env (strings unless said):
//   HOST_URL          the host, e.g. http://127.0.0.1:8080 (required)
//   ACCESS_TTL_MS     how long a host's grant is trusted per token digest (default 5000)
//   VALIDATOR         the validator as a WebAssembly.Module (required; an edge
//                     runtime imports it, Deno and Node compile it from the bytes)
//   VALIDATOR_BYTES   the bytes the module was compiled from (ArrayBuffer or
//                     Uint8Array): when given, their SHA-256 is the artifact's digest
//   VALIDATOR_SHA256  the declared digest (hex), for runtimes where the bytes are
//                     not at hand (a module object cannot be hashed); when both are
//                     given they must agree
// Without a digest, or when the two disagree, the gateway refuses to validate
// (503 validator_unverified) and still forwards everything that is not a load.
//
// Its decisions:
// * One module, the validator from `env`. Edge runtimes hand out Wasm as a
//   `WebAssembly.Module` (workerd refuses `WebAssembly.compile` and `eval`:
//   "Wasm code generation disallowed by embedder"), so the handler takes
//   `env.VALIDATOR` and instantiates the web glue with `initSync({module})`;
//   the glue never fetches anything when given a module. Its single
//   instance per realm means one validator per isolate.
// * Whose bytes are hashed. A module object cannot be hashed, so the digest
//   is of bytes: Deno and Node compile the module from the bytes they hash;
//   workerd embeds the same file twice from its config (module import and
//   data binding) and also gets the committed `validate_bg.wasm.sha256`,
//   which must agree; a Cloudflare deployment can only declare the
//   committed digest (CI checks that file against a rebuild). No digest, or
//   two that disagree: 503 `validator_unverified`.
// * When the SHA-256 is checked. `/rules` answers only a caller with read
//   access and the gateway has no token of its own, so "at start" is the
//   first authorized load of each graph (an edge isolate has no start of its
//   own either), after the caller's access check; the verdict is cached with
//   the schema for 30 s, so a host upgraded to another build is noticed
//   within 30 s. A mismatch refuses loads with 503 `validator_mismatch`
//   (never validates with other rules, never forwards unchecked); other
//   routes are still proxied.
// * Grant cache. The host's 204 from `/access?permission=change` is trusted
//   per graph and token SHA-256 (never the token) for `ACCESS_TTL_MS` (5 s):
//   a revoked token can still get a validation report from the gateway for
//   at most that long, while its loads are refused by the host at once (a
//   forwarded load carries the caller's token). Refusals are never cached.

import { initSync, compileSchema } from '../pkg/web/validate.js';

/** How long a graph's schema and rules (and so the SHA-256 verdict) are trusted. */
export const SCHEMA_TTL_MS = 30_000;
/** How long the host's "this token may load into this graph" is trusted (env ACCESS_TTL_MS). */
export const DEFAULT_ACCESS_TTL_MS = 5_000;
/** Grants remembered at once; past it the memory is dropped and the host asked again. */
const MAX_REMEMBERED_GRANTS = 10_000;
const LOAD_ROUTE = /^\/graphs\/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\/load\/ndjson$/;
/**
 * Never forwarded: hop-by-hop headers (RFC 9110 §7.6.1), and Host and
 * Content-Length, which the runtime's fetch and server set for the body they send.
 */
const NOT_FORWARDED = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'host', 'content-length']);
const encoder = new TextEncoder();

function json(status, body, headers = {}) {
  return jsonText(status, JSON.stringify(body), headers);
}

function jsonText(status, text, headers = {}) {
  return new Response(text, { status, headers: { 'content-type': 'application/json', ...headers } });
}

/** A JSON error answer whose `details.report` is the validator's report as it
 * wrote it (SPEC §3: byte for byte), after the other `details` members. */
function withReport(status, head, details, reportText) {
  const members = JSON.stringify(details).slice(1, -1);
  return jsonText(status, `${JSON.stringify(head).slice(0, -1)},"details":{${members}${members ? ',' : ''}"report":${reportText}}}`);
}

const unreachable = (e) =>
  json(502, { error: `the host is unreachable: ${e?.cause?.code ?? e?.message ?? e}`, code: 'bad_gateway' });

function forwardedHeaders(headers) {
  const out = new Headers();
  for (const [name, value] of headers) {
    if (!NOT_FORWARDED.has(name)) out.append(name, value);
  }
  return out;
}

async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** Reads a body stream up to `limit` bytes; null once it runs over (the rest is cancelled). */
async function readBounded(stream, limit) {
  if (!stream) return new Uint8Array(0);
  const reader = stream.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/**
 * Instantiates the validator of this isolate. wasm-bindgen's glue holds one
 * instance per JS realm, so the first env's module is the one every later
 * request uses, and an env with another module is refused.
 */
let boundModule = null;

function bindValidator(env) {
  const module = env.VALIDATOR;
  if (!(module instanceof WebAssembly.Module)) {
    throw new Error('env.VALIDATOR must be the validator as a WebAssembly.Module');
  }
  if (boundModule === null) {
    initSync({ module });
    boundModule = module;
  } else if (boundModule !== module) {
    throw new Error('one validator per isolate: env.VALIDATOR changed after the first request');
  }
}

/** {sha256} or {refusal} (why the artifact's digest is unknown); see the header. */
async function artifactDigest(env) {
  const declared = typeof env.VALIDATOR_SHA256 === 'string' ? env.VALIDATOR_SHA256.trim().toLowerCase() : null;
  let measured = null;
  if (env.VALIDATOR_BYTES != null) measured = await sha256Hex(env.VALIDATOR_BYTES);
  if (measured && declared && measured !== declared) {
    return { refusal: `the validator's bytes hash to ${measured}, not the declared VALIDATOR_SHA256 ${declared}` };
  }
  const sha256 = measured ?? declared;
  if (!sha256) return { refusal: 'no digest for the validator: give VALIDATOR_BYTES or VALIDATOR_SHA256' };
  return { sha256, source: measured ? 'bytes' : 'declared' };
}

class Gateway {
  constructor(env) {
    if (!env.HOST_URL) throw new Error('env.HOST_URL is required');
    this.hostUrl = String(env.HOST_URL);
    const ttl = Number(env.ACCESS_TTL_MS ?? DEFAULT_ACCESS_TTL_MS);
    this.accessTtlMs = Number.isFinite(ttl) && ttl >= 0 ? ttl : DEFAULT_ACCESS_TTL_MS;
    bindValidator(env);
    /** The artifact's digest, worked out once per gateway (a promise: crypto.subtle is async). */
    this.artifact = artifactDigest(env);
    /** graph id → {expires, compiled, bounds, legacyIdentity} or {expires, refusal} */
    this.graphs = new Map();
    /** graph id + token digest → when the host's grant of `change` stops being trusted */
    this.granted = new Map();
  }

  hostFetch(path, init = {}) {
    return fetch(new URL(path, this.hostUrl), { redirect: 'manual', ...init });
  }

  /** GET a JSON document from the host with the caller's credentials. */
  async getJson(path, authorization) {
    const res = await this.hostFetch(path, { headers: authorization ? { authorization } : {} });
    const text = await res.text();
    let body = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    return { status: res.status, headers: res.headers, text, body };
  }

  /**
   * Asks the host whether the caller may load into the graph, before the
   * gateway validates or answers anything. Grants are remembered per token
   * digest (never the token) for accessTtlMs; refusals are not.
   */
  async authorize(id, authorization) {
    const key = `${id}\n${await sha256Hex(encoder.encode(authorization ?? ''))}`;
    if ((this.granted.get(key) ?? 0) > Date.now()) return { ok: true };
    const answer = await this.getJson(`/graphs/${id}/access?permission=change`, authorization);
    if (answer.status !== 204) return { ok: false, answer };
    if (this.granted.size >= MAX_REMEMBERED_GRANTS) this.granted.clear();
    this.granted.set(key, Date.now() + this.accessTtlMs);
    return { ok: true };
  }

  /** The graph's compiled schema and rules, or why the gateway cannot validate for it. */
  async graphRules(id, authorization) {
    const hit = this.graphs.get(id);
    if (hit && hit.expires > Date.now()) return hit;
    const artifact = await this.artifact;
    const [schema, rules] = await Promise.all([
      this.getJson(`/graphs/${id}/schema`, authorization),
      this.getJson(`/graphs/${id}/rules`, authorization),
    ]);
    // Unknown graph, a lapsed grant, …: the host's own answer is the right one.
    if (schema.status !== 200 || rules.status !== 200 || !schema.body || !rules.body) return { forward: true };
    let entry;
    if (artifact.refusal) {
      entry = { refusal: { error: artifact.refusal, code: 'validator_unverified' } };
    } else if (rules.body.validator_sha256 !== artifact.sha256) {
      // Another validator build: applying our rules could pass what the host refuses (or
      // the reverse), so refuse to validate until the two agree again.
      const details = { host_validator_sha256: rules.body.validator_sha256, gateway_validator_sha256: artifact.sha256 };
      entry = {
        refusal: {
          error: `the host validates with another validator build (${details.host_validator_sha256}) than this gateway (${artifact.sha256}); refusing to validate`,
          code: 'validator_mismatch',
          details,
        },
      };
    } else {
      entry = {
        compiled: compileSchema(schema.body.source),
        bounds: rules.body.bounds,
        legacyIdentity: rules.body.legacy_identity === true,
      };
    }
    entry.expires = Date.now() + SCHEMA_TTL_MS;
    this.graphs.set(id, entry);
    return entry;
  }

  /** Forwards one request to the host; `body` is the bytes already read, or undefined to stream. */
  async forward(request, body) {
    const url = new URL(request.url);
    const init = {
      method: request.method,
      headers: forwardedHeaders(request.headers),
      redirect: 'manual',
    };
    if (body !== undefined) init.body = body;
    else if (request.body && request.method !== 'GET' && request.method !== 'HEAD') {
      init.body = request.body;
      init.duplex = 'half'; // Node's fetch needs it for a streamed body; the others ignore it
    }
    let answer;
    try {
      answer = await this.hostFetch(url.pathname + url.search, init);
    } catch (e) {
      return unreachable(e);
    }
    return new Response(answer.body, { status: answer.status, statusText: answer.statusText, headers: forwardedHeaders(answer.headers) });
  }

  async load(id, request) {
    const authorization = request.headers.get('authorization');
    let access;
    try {
      access = await this.authorize(id, authorization);
    } catch (e) {
      return unreachable(e);
    }
    if (!access.ok) {
      const { status, headers, text } = access.answer;
      const keep = {};
      for (const name of ['content-type', 'retry-after', 'www-authenticate']) {
        if (headers.get(name)) keep[name] = headers.get(name);
      }
      return new Response(text || JSON.stringify({ error: `the host answered ${status}`, code: 'refused' }), {
        status,
        headers: { 'content-type': 'application/json', ...keep },
      });
    }
    let rules;
    try {
      rules = await this.graphRules(id, authorization);
    } catch (e) {
      return unreachable(e);
    }
    if (rules.forward) return this.forward(request);
    if (rules.refusal) return json(503, rules.refusal);
    const limit = rules.bounds.max_batch_bytes;
    const tooLarge = (actual) =>
      json(413, { error: `the body exceeds ${limit} bytes`, code: 'batch_bytes_limit', details: { resource: 'batch_bytes', limit, actual } });
    const declared = Number(request.headers.get('content-length') ?? NaN);
    if (Number.isFinite(declared) && declared > limit) return tooLarge(declared);
    const body = await readBounded(request.body, limit);
    if (body === null) return tooLarge(limit + 1);
    const mode = new URL(request.url).searchParams.get('mode') ?? 'merge';
    let text;
    try {
      // The host's own bounds and identity rule: the same verdict as the host.
      const options = { mode, limits: rules.bounds, legacy_identity: rules.legacyIdentity };
      text = rules.compiled.validate(body, JSON.stringify(options));
    } catch {
      // An options error (e.g. an unknown mode): the host words it.
      return this.forward(request, body);
    }
    // `ok` is the report's first member (SPEC §3's fixed member order), so an
    // accepted batch's report is not parsed: a batch of edges whose nodes are
    // stored lists two refs per line, more bytes than the batch. Any other
    // layout would only be parsed, never judged differently.
    if (text.startsWith('{"ok":true,')) return this.forward(request, body);
    const report = JSON.parse(text);
    if (report.ok) return this.forward(request, body);
    const bound = report.errors.find((e) => e.limit);
    if (bound) return withReport(413, { error: bound.message, code: bound.code }, bound.limit, text);
    return withReport(422, { error: 'the batch failed validation', code: 'validation_failed' }, {}, text);
  }

  async fetch(request) {
    const url = new URL(request.url);
    const load = request.method === 'POST' && LOAD_ROUTE.exec(url.pathname);
    if (load) {
      const contentType = (request.headers.get('content-type') ?? '').split(';')[0].trim();
      if (contentType === 'application/x-ndjson') return this.load(load[1], request);
    }
    return this.forward(request);
  }
}

/** One gateway per env object (an isolate sees the same env on every request). */
const gateways = new WeakMap();

export default {
  async fetch(request, env) {
    let gateway = gateways.get(env);
    try {
      if (!gateway) {
        gateway = new Gateway(env);
        gateways.set(env, gateway);
      }
      return await gateway.fetch(request);
    } catch (e) {
      return json(500, { error: String(e?.message ?? e), code: 'gateway_error' });
    }
  },
};
