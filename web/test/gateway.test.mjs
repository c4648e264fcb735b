// The edge gateway (web/edge/gateway.mjs, one fetch handler) in three
// runtimes: workerd, Deno and Node, each started as a child process from its
// own entry (edge/workerd.capnp, edge/deno.mjs, edge/node.mjs) in front of a
// real host process (`omnigraph-host serve --auth`, built by `cargo test`;
// OMNIGRAPH_HOST_BIN overrides where it is). The same tests run for each
// runtime. workerd and Deno come from web/node_modules (scripts/setup.sh);
// OMNIGRAPH_GATEWAY_RUNTIMES=node,deno narrows the list.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HOST_BIN, startHost } from './host.mjs';

const require = createRequire(import.meta.url);
const WEB = new URL('..', import.meta.url).pathname;
const SAMPLES = new URL('../../samples/', import.meta.url);
const TOKEN = 'edge-test-token';
const READ_TOKEN = 'edge-read-only-token';
const GOOD = readFileSync(new URL('people.ndjson', SAMPLES));
const BAD = readFileSync(new URL('people-bad.ndjson', SAMPLES));
/** The host's body bound, small so that the gateway's 413 is cheap to reach. */
const MAX_BATCH_BYTES = 64 * 1024;
const ARTIFACT_SHA256 = readFileSync(new URL('../pkg/validate_bg.wasm.sha256', import.meta.url), 'utf8').trim();

/** How each runtime starts the gateway from its entry; `env` carries HOST_URL. */
const RUNTIMES = {
  workerd: (port, env) =>
    spawn(require('workerd').default, ['serve', 'edge/workerd.capnp', '--socket-addr', `http=127.0.0.1:${port}`], { cwd: WEB, env }),
  deno: (port, env) =>
    spawn(
      require('deno/install_api.cjs').runInstall(),
      ['run', '--no-config', '--no-lock', '--allow-net', '--allow-env', '--allow-read=pkg', 'edge/deno.mjs'],
      { cwd: WEB, env: { ...env, PORT: String(port), DENO_NO_UPDATE_CHECK: '1', DENO_NO_PROMPT: '1' } },
    ),
  // Under --disallow-code-generation-from-strings, as edge runtimes forbid eval.
  node: (port, env) =>
    spawn(process.execPath, ['--disallow-code-generation-from-strings', 'edge/node.mjs'], { cwd: WEB, env: { ...env, PORT: String(port) } }),
};
const selected = (process.env.OMNIGRAPH_GATEWAY_RUNTIMES ?? Object.keys(RUNTIMES).join(',')).split(',');

function freePort() {
  const server = createServer();
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    }),
  );
}

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`)));
}

/** Starts one gateway in `runtime` in front of `hostUrl`; resolves {url, child} once it answers HTTP. */
async function startGateway(runtime, hostUrl) {
  const port = await freePort();
  const { HOST_URL: _, ...inherited } = process.env;
  const child = RUNTIMES[runtime](port, { ...inherited, HOST_URL: hostUrl });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${runtime} gateway exited ${child.exitCode}: ${output}`);
    try {
      // Any HTTP answer (the host's, or 502 for a dead one) means it listens.
      await (await fetch(`${url}/healthz`)).arrayBuffer();
      return { url, child, output: () => output };
    } catch {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`${runtime} gateway did not answer within 20 s: ${output}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

let root, host, hostUrl, liar, liarUrl, deadUrl;

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'omnigraph-edge-'));
  execFileSync(HOST_BIN, ['init', '--root', join(root, 'graphs', 'g'), new URL('people.pg', SAMPLES).pathname], { stdio: 'ignore' });
  const digest = (t) => createHash('sha256').update(t).digest('hex');
  writeFileSync(
    join(root, 'auth.toml'),
    `[[token]]\nactor = "edge-client"\nsha256 = "${digest(TOKEN)}"\ngraphs = { "*" = ["read", "change", "branch_create"] }\n` +
      `[[token]]\nactor = "edge-reader"\nsha256 = "${digest(READ_TOKEN)}"\ngraphs = { "*" = ["read"] }\n`,
  );
  ({ url: hostUrl, process: host } = await startHost([
    '--root', join(root, 'graphs'), '--auth', join(root, 'auth.toml'), '--max-batch-bytes', String(MAX_BATCH_BYTES),
  ]));
  // The same host, but its /rules claims another validator build (as after an
  // upgrade of the host alone): a gateway in front of it must refuse to validate.
  liar = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const answer = await fetch(new URL(req.url, hostUrl), {
      method: req.method,
      headers: Object.fromEntries(Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k))),
      body: chunks.length ? Buffer.concat(chunks) : undefined,
    });
    let body = Buffer.from(await answer.arrayBuffer());
    if (/\/rules$/.test(req.url.split('?')[0]) && answer.status === 200) {
      body = Buffer.from(JSON.stringify({ ...JSON.parse(body), validator_sha256: '0'.repeat(64) }));
    }
    res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/octet-stream' });
    res.end(body);
  });
  liarUrl = await listen(liar);
  deadUrl = `http://127.0.0.1:${await freePort()}`; // nothing listens there
});

after(() => {
  liar?.close();
  host?.kill('SIGTERM');
  rmSync(root, { recursive: true, force: true });
});

const load = (base, body, { token = TOKEN, branch = 'main' } = {}) =>
  fetch(`${base}/graphs/g/load/ndjson?mode=merge&branch=${branch}&from=main`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body,
  });

/** The host's load counters: {loads (all outcomes), committed, bytes}. */
async function hostLoads() {
  const text = await (await fetch(`${hostUrl}/metrics`)).text();
  let loads = 0;
  for (const m of text.matchAll(/^omnigraph_loads_total\{outcome="[^"]*"\} (\d+)$/gm)) loads += Number(m[1]);
  const committed = Number(/^omnigraph_loads_total\{outcome="committed"\} (\d+)$/m.exec(text)?.[1] ?? 0);
  const bytes = Number(/^omnigraph_load_bytes_total (\d+)$/m.exec(text)[1]);
  return { loads, committed, bytes };
}

for (const runtime of selected) {
  describe(`gateway in ${runtime}`, () => {
    let gateway, dead, mismatched;
    before(async () => {
      assert.ok(RUNTIMES[runtime], `unknown runtime ${runtime}`);
      [gateway, dead, mismatched] = await Promise.all([
        startGateway(runtime, hostUrl),
        startGateway(runtime, deadUrl),
        startGateway(runtime, liarUrl),
      ]);
    });
    after(() => {
      for (const g of [gateway, dead, mismatched]) g?.child.kill('SIGTERM');
    });

    test('an unauthenticated bad batch gets the host\'s 401 and no report (cold caches)', async () => {
      const before = await hostLoads();
      const res = await load(gateway.url, BAD, { token: null });
      const body = await res.json();
      assert.equal(res.status, 401, JSON.stringify(body));
      assert.equal(body.code, 'unauthenticated');
      assert.equal(body.details?.report, undefined, 'no validation report before the host authorized the caller');
      assert.deepEqual(await hostLoads(), before);
    });

    test('a bad batch gets 422 with the report from the gateway; the host\'s load route is not contacted', async () => {
      const before = await hostLoads();
      const res = await load(gateway.url, BAD, { branch: runtime });
      const body = await res.json();
      assert.equal(res.status, 422, JSON.stringify(body));
      assert.equal(body.code, 'validation_failed');
      assert.equal(body.details.report.ok, false);
      assert.ok(body.details.report.errors.some((e) => e.code === 'unknown_type' && e.line === 2), JSON.stringify(body));
      assert.deepEqual(await hostLoads(), before);
    });

    test('a refused batch\'s report is the validator\'s bytes, the same as the host\'s own answer carries', async () => {
      // The report is the last member of `details`, itself the last member.
      const reportText = (answer) => answer.slice(answer.indexOf('"report":') + '"report":'.length, -2);
      const edges = '{"edge":"Knows","from":"Ada","to":"Nobody \\"x\\""}\n{"type":"Persn"}\n';
      for (const batch of [BAD, edges]) {
        const viaGateway = await (await load(gateway.url, batch, { branch: runtime })).text();
        const fromHost = await (await load(hostUrl, batch, { branch: runtime })).text();
        assert.equal(JSON.parse(viaGateway).code, 'validation_failed', viaGateway);
        assert.equal(reportText(viaGateway), reportText(fromHost));
        assert.deepEqual(JSON.parse(viaGateway).details.report, JSON.parse(reportText(fromHost)));
      }
    });

    test('a good batch is forwarded unchanged (query, Authorization) and committed; the answer comes back', async () => {
      const before = await hostLoads();
      const res = await load(gateway.url, GOOD, { branch: runtime });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.equal(body.branch, runtime, 'the query reached the host');
      assert.equal(body.created, true);
      assert.equal(body.commit.actor, 'edge-client', 'the caller\'s token reached the host');
      assert.equal(body.counts.Person.inserted, 2);
      const afterLoads = await hostLoads();
      assert.equal(afterLoads.committed, before.committed + 1);
      assert.equal(afterLoads.bytes, before.bytes + GOOD.length, 'the host got the exact bytes');
    });

    test('auth passes through: missing or wrong token 401, read-only token 403, never a report (warm caches)', async () => {
      const before = await hostLoads();
      for (const [token, status, code] of [[null, 401, 'unauthenticated'], ['wrong', 401, 'unauthenticated'], [READ_TOKEN, 403, 'forbidden']]) {
        for (const batch of [BAD, GOOD]) {
          const res = await load(gateway.url, batch, { token, branch: runtime });
          const body = await res.json();
          assert.equal(res.status, status, `${token}: ${JSON.stringify(body)}`);
          assert.equal(body.code, code, JSON.stringify(body));
          assert.equal(body.details?.report, undefined, 'no validation report for a caller the host refuses');
        }
      }
      assert.deepEqual(await hostLoads(), before);
    });

    test('a batch over the host\'s byte bound gets 413 from the gateway, declared or streamed', async () => {
      const before = await hostLoads();
      const line = '{"type":"Person","data":{"name":"Big","tags":["' + 'x'.repeat(1000) + '"]}}\n';
      const big = new TextEncoder().encode(line.repeat(Math.ceil((MAX_BATCH_BYTES + 1) / line.length)));
      const streamed = () =>
        new ReadableStream({
          start(c) {
            for (let at = 0; at < big.length; at += 8192) c.enqueue(big.subarray(at, at + 8192));
            c.close();
          },
        });
      for (const body of [big, streamed()]) {
        const res = await fetch(`${gateway.url}/graphs/g/load/ndjson?branch=${runtime}`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${TOKEN}` },
          body,
          duplex: 'half',
        });
        const answer = await res.json();
        assert.equal(res.status, 413, JSON.stringify(answer));
        assert.equal(answer.code, 'batch_bytes_limit');
        assert.equal(answer.details.limit, MAX_BATCH_BYTES);
        assert.equal(answer.details.report, undefined, 'refused at the bound, before the whole body was read and validated');
      }
      const res = await load(gateway.url, big, { token: null });
      assert.equal(res.status, 401, 'authenticated first, even for a body over the bound');
      assert.deepEqual(await hostLoads(), before);
    });

    test('other routes are forwarded and their answers streamed back byte for byte', async () => {
      const auth = { authorization: `Bearer ${TOKEN}` };
      const direct = await fetch(`${hostUrl}/graphs/g/export?branch=${runtime}`, { headers: auth });
      const via = await fetch(`${gateway.url}/graphs/g/export?branch=${runtime}`, { headers: auth });
      assert.equal(via.status, 200);
      assert.equal(via.headers.get('content-type'), direct.headers.get('content-type'));
      const [a, b] = [await direct.text(), await via.text()];
      assert.equal(b, a);
      assert.equal(b.trim().split('\n').length, 5);
      const commits = await fetch(`${gateway.url}/graphs/g/commits?branch=${runtime}`, { headers: auth });
      assert.equal(commits.status, 200);
      const log = (await commits.json()).commits;
      assert.deepEqual(log, (await (await fetch(`${hostUrl}/graphs/g/commits?branch=${runtime}`, { headers: auth })).json()).commits);
      assert.ok(log.some((c) => c.actor === 'edge-client'), JSON.stringify(log));
      const refused = await fetch(`${gateway.url}/graphs/g/commits`);
      assert.equal(refused.status, 401);
      // A request body on another route is streamed through to the host (the dry run answers).
      const dry = await fetch(`${gateway.url}/graphs/g/validate?branch=${runtime}`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/x-ndjson' },
        body: BAD,
      });
      const report = await dry.json();
      assert.equal(dry.status, 200, JSON.stringify(report));
      assert.equal(report.ok, false);
      assert.ok(report.report.errors.some((e) => e.code === 'unknown_type' && e.line === 2));
    });

    test('a host that is down gives 502 bad_gateway', async () => {
      for (const res of [await load(dead.url, GOOD), await fetch(`${dead.url}/graphs/g/commits`)]) {
        const body = await res.json();
        assert.equal(res.status, 502, JSON.stringify(body));
        assert.equal(body.code, 'bad_gateway');
      }
    });

    test('a host with another validator SHA-256 in /rules: the gateway refuses to validate (503), nothing is loaded', async () => {
      const before = await hostLoads();
      for (const batch of [GOOD, BAD]) {
        const res = await load(mismatched.url, batch, { branch: `${runtime}-mismatch` });
        const body = await res.json();
        assert.equal(res.status, 503, JSON.stringify(body));
        assert.equal(body.code, 'validator_mismatch');
        assert.equal(body.details.gateway_validator_sha256, ARTIFACT_SHA256);
        assert.equal(body.details.host_validator_sha256, '0'.repeat(64));
        assert.equal(body.details.report, undefined);
      }
      // Still authenticated first.
      assert.equal((await load(mismatched.url, BAD, { token: null })).status, 401);
      assert.deepEqual(await hostLoads(), before);
    });
  });
}

describe('the gateway module', () => {
  test('uses web-standard APIs only: no node: imports, no eval or new Function', () => {
    const source = readFileSync(new URL('../edge/gateway.mjs', import.meta.url), 'utf8');
    const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
    assert.match(code, /export default \{/);
    assert.deepEqual([...code.matchAll(/from\s+'([^']+)'/g)].map((m) => m[1]), ['../pkg/web/validate.js']);
    assert.doesNotMatch(code, /require\(|import\(|\beval\s*\(|\bFunction\s*\(|process\.|Buffer\b|Deno\./);
  });

  test('refuses to validate when the bytes do not hash to the declared VALIDATOR_SHA256', async () => {
    const { default: gateway } = await import('../edge/gateway.mjs');
    const { validatorModule } = await import('../edge/node.mjs');
    const { module, bytes } = validatorModule();
    const env = { HOST_URL: hostUrl, VALIDATOR: module, VALIDATOR_BYTES: bytes, VALIDATOR_SHA256: 'f'.repeat(64) };
    const res = await gateway.fetch(
      new Request(`http://gateway/graphs/g/load/ndjson?branch=unverified&from=main`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${TOKEN}` },
        body: GOOD,
      }),
      env,
    );
    const body = await res.json();
    assert.equal(res.status, 503, JSON.stringify(body));
    assert.equal(body.code, 'validator_unverified');
    assert.match(body.error, new RegExp(ARTIFACT_SHA256));
  });
});
