// Loading the validator artifact as the upload page does (no DOM, so the
// page and the browser bench load it by the same code): fetch, SHA-256 of a
// clone, WebAssembly.validate, compileStreaming of the response. app.js
// keeps it once per page; the bench's first visits and the parity harness
// use it; index.html preloads it (modulepreload) so the artifact's fetch
// does not start a round trip later than when the code lived in app.js.

/** Where the host serves the validator artifact. */
export const VALIDATOR_PATH = '/web/pkg/web/validate_bg.wasm';

/** Whether this browser's engine can compile the validator's bytes. */
function runsValidator(wasm) {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(new Uint8Array(wasm));
  } catch {
    return false;
  }
}

async function hex(buffer) {
  return [...new Uint8Array(await crypto.subtle.digest('SHA-256', buffer))].map((b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * The validator artifact: the SHA-256 of its bytes and, when this browser
 * runs them, the module compiled from that very response (`module` is null
 * when it cannot). Compiled by streaming from the response, not from a copy
 * of its bytes: only then does the browser keep the optimised code beside
 * its cached copy of the file (V8's code cache), so a returning visit has
 * it as the module loads, also after the host's 304 revalidation, and its
 * warm-up takes about half as long (docs/lab/2026-12-06-returning-visit-code-cache.md,
 * "A returning visit"). Throws when the artifact cannot be fetched.
 */
export async function loadValidator() {
  const response = await fetch(VALIDATOR_PATH);
  if (!response.ok) throw new Error(`the validator: HTTP ${response.status}`);
  const copy = response.clone();
  // Started at once, so compilation overlaps the download; a browser that
  // cannot run the bytes rejects here and gets a null module.
  const compiling = typeof globalThis.WebAssembly?.compileStreaming === 'function'
    ? WebAssembly.compileStreaming(response).catch(() => null)
    : null;
  const bytes = await copy.arrayBuffer();
  const sha256 = await hex(bytes);
  const module = runsValidator(bytes) ? await compiling : null;
  return { sha256, module };
}
