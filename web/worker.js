// Validates a file off the page's thread with the web build of the validator:
// reads it in chunks (progress by bytes), then validates all of it at once.
import init, { compileSchema } from '/web/pkg/web/validate.js';

const ready = init();
let compiled = null;
let compiledSource = null;

self.onmessage = async ({ data }) => {
  try {
    await ready;
    // options: the mode plus the host's bounds and identity rule from /rules,
    // so the page judges with exactly the host's numbers.
    const { file, schemaSource, options } = data;
    if (compiledSource !== schemaSource) {
      compiled = compileSchema(schemaSource);
      compiledSource = schemaSource;
    }
    const bytes = new Uint8Array(file.size);
    let done = 0;
    const reader = file.stream().getReader();
    for (;;) {
      const { done: end, value } = await reader.read();
      if (end) break;
      bytes.set(value, done);
      done += value.length;
      self.postMessage({ kind: 'progress', done, total: file.size });
    }
    self.postMessage({ kind: 'validating' });
    const report = compiled.validate(bytes, JSON.stringify(options));
    self.postMessage({ kind: 'report', report });
  } catch (e) {
    self.postMessage({ kind: 'error', message: String(e?.message ?? e) });
  }
};
