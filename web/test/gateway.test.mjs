// The edge gateway against a real host process (`omnigraph-host serve`, built
// by `cargo test`; OMNIGRAPH_HOST_BIN overrides where it is).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGateway } from '../edge/gateway.mjs';
import { HOST_BIN, startHost } from './host.mjs';

const SAMPLES = new URL('../../samples/', import.meta.url);
const TOKEN = 'edge-test-token';
const READ_TOKEN = 'edge-read-only-token';

let root, host, hostUrl, gateway, gatewayUrl;

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`)));
}

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'omnigraph-edge-'));
  execFileSync(HOST_BIN, ['init', '--root', join(root, 'graphs', 'g'), new URL('people.pg', SAMPLES).pathname], { stdio: 'ignore' });
  const digest = createHash('sha256').update(TOKEN).digest('hex');
  const readDigest = createHash('sha256').update(READ_TOKEN).digest('hex');
  writeFileSync(
    join(root, 'auth.toml'),
    `[[token]]\nactor = "edge-client"\nsha256 = "${digest}"\ngraphs = { "*" = ["read", "change"] }\n` +
      `[[token]]\nactor = "edge-reader"\nsha256 = "${readDigest}"\ngraphs = { "*" = ["read"] }\n`,
  );
  ({ url: hostUrl, process: host } = await startHost(['--root', join(root, 'graphs'), '--auth', join(root, 'auth.toml')]));
  gateway = createGateway({ hostUrl });
  gatewayUrl = await listen(gateway);
});

after(() => {
  gateway?.close();
  host?.kill('SIGTERM');
  rmSync(root, { recursive: true, force: true });
});

const load = (base, body, token = TOKEN) =>
  fetch(`${base}/graphs/g/load/ndjson?mode=merge`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body,
  });

const hostMetrics = async () => (await fetch(`${hostUrl}/metrics`)).text();

test('a bad batch is refused by the gateway; the host sees no load', async () => {
  const bad = readFileSync(new URL('people-bad.ndjson', SAMPLES));
  const res = await load(gatewayUrl, bad);
  assert.equal(res.status, 422);
  const body = await res.json();
  assert.equal(body.code, 'validation_failed');
  assert.equal(body.details.report.ok, false);
  assert.ok(body.details.report.errors.some((e) => e.code === 'unknown_type' && e.line === 2));
  const metrics = await hostMetrics();
  assert.doesNotMatch(metrics, /omnigraph_loads_total\{/, metrics);
  assert.match(metrics, /omnigraph_load_bytes_total 0/);
});

test('a good batch is forwarded unchanged and committed, as the token\'s actor', async () => {
  const res = await load(gatewayUrl, readFileSync(new URL('people.ndjson', SAMPLES)));
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.equal(body.commit.actor, 'edge-client');
  assert.equal(body.counts.Person.inserted, 2);
  assert.match(await hostMetrics(), /omnigraph_loads_total\{outcome="committed"\} 1/);
});

test('auth headers pass through: without a token the host answers 401', async () => {
  const res = await load(gatewayUrl, readFileSync(new URL('people.ndjson', SAMPLES)), null);
  assert.equal(res.status, 401);
  assert.equal((await res.json()).code, 'unauthenticated');
});

test('the caller is authorized by the host first: without the right to load, no report', async () => {
  const bad = readFileSync(new URL('people-bad.ndjson', SAMPLES));
  for (const [token, status, code] of [[null, 401, 'unauthenticated'], ['wrong', 401, 'unauthenticated'], [READ_TOKEN, 403, 'forbidden']]) {
    // Once with a cold schema cache and once with a warm one (the good load above warmed it).
    const res = await load(gatewayUrl, bad, token);
    const body = await res.json();
    assert.equal(res.status, status, JSON.stringify(body));
    assert.equal(body.code, code, JSON.stringify(body));
    assert.equal(body.details?.report, undefined, 'no validation report for a caller the host refuses');
  }
  const fresh = createGateway({ hostUrl });
  const freshUrl = await listen(fresh);
  try {
    const res = await load(freshUrl, bad, null);
    assert.equal(res.status, 401);
    assert.equal((await res.json()).details?.report, undefined);
  } finally {
    fresh.close();
  }
});

test('other routes are proxied', async () => {
  const res = await fetch(`${gatewayUrl}/graphs/g/commits`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(res.status, 200);
  assert.equal((await res.json()).commits.length, 2);
});

test('a host that is down gives 502', async () => {
  const dead = createGateway({ hostUrl: 'http://127.0.0.1:9' });
  const url = await listen(dead);
  try {
    const res = await load(url, '{"type":"Person","data":{"name":"X"}}\n');
    assert.equal(res.status, 502);
    assert.equal((await res.json()).code, 'bad_gateway');
  } finally {
    dead.close();
  }
});

test('the gateway and the validator run where code generation from strings is forbidden', () => {
  const script = `
    import { createRequire } from 'node:module';
    await import('./edge/gateway.mjs');
    const v = createRequire(import.meta.url)('./pkg/nodejs/validate.js');
    const report = JSON.parse(v.compileSchema('node P { n: String @key }').validate(new TextEncoder().encode('{"type":"P","data":{"n":"a"}}\\n')));
    console.log(report.ok);`;
  const out = execFileSync(process.execPath, ['--disallow-code-generation-from-strings', '--input-type=module', '-e', script], {
    cwd: new URL('..', import.meta.url).pathname,
  });
  assert.equal(out.toString().trim(), 'true');
});
