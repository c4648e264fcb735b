// Browser side of the parity harness: loads the web package, hashes the exact
// bytes it instantiates, validates every corpus case, and leaves the results
// on window.__results for the test driver.
import init, { compileSchema } from '/web/pkg/web/validate.js';

function hex(buffer) {
  return [...new Uint8Array(buffer)].map((b) => b.toString(16).padStart(2, '0')).join('');
}

async function run() {
  const wasm = await (await fetch('/web/pkg/web/validate_bg.wasm')).arrayBuffer();
  const sha = hex(await crypto.subtle.digest('SHA-256', wasm));
  const module = await WebAssembly.compile(wasm);
  const imports = WebAssembly.Module.imports(module);
  await init({ module_or_path: module });
  const cases = await (await fetch('/cases.json')).json();
  const reports = {};
  for (const name of cases) {
    const base = `/tests/vectors/${name}/`;
    const [schemaText, options, input] = await Promise.all([
      fetch(base + 'schema.pg').then((r) => r.text()),
      fetch(base + 'options.json').then((r) => r.text()),
      fetch(base + 'input.ndjson').then((r) => r.arrayBuffer()),
    ]);
    const schema = compileSchema(schemaText);
    reports[name] = schema.validate(new Uint8Array(input), options) + '\n';
    schema.free();
  }
  return { sha, imports, reports };
}

run().then(
  (results) => { window.__results = results; },
  (e) => { window.__error = String((e && e.stack) || e); },
);
