// The edge gateway on workerd / Cloudflare Workers: the fetch handler in
// gateway.mjs with the validator imported as a module, the way these runtimes
// hand out Wasm (the import is a WebAssembly.Module; compiling Wasm from bytes
// at run time is forbidden there). Configuration arrives as bindings:
// HOST_URL, ACCESS_TTL_MS, and for the artifact's digest VALIDATOR_BYTES (the
// same file as a data blob, hashed) and/or VALIDATOR_SHA256 (declared). See
// workerd.capnp beside this file and the README's gateway section.

import gateway from './gateway.mjs';
import VALIDATOR from '../pkg/web/validate_bg.wasm';

let bound = null;

export default {
  fetch(request, env, ctx) {
    // The same env on every request of this isolate: build the gateway's env once.
    if (bound === null || bound.from !== env) bound = { from: env, env: { ...env, VALIDATOR } };
    return gateway.fetch(request, bound.env, ctx);
  },
};
