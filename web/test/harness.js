// Browser side of the parity harness: loads the web package, hashes the exact
// bytes it instantiates (web/load.js, as the upload page does), validates
// every corpus case, and leaves the results on window.__results for the test
// driver.
import init, { compileSchema } from '/web/pkg/web/validate.js';
import { loadValidator } from '/web/load.js';

async function run() {
  const { sha256: sha, module } = await loadValidator();
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
