// The edge gateway on Deno (and Deno Deploy): Deno.serve around the fetch
// handler in gateway.mjs. The validator is compiled from the bytes of
// web/pkg/web/validate_bg.wasm (VALIDATOR_WASM overrides the path), so its
// SHA-256 is measured from the bytes actually compiled.
//
//   HOST_URL=http://127.0.0.1:8080 PORT=8081 deno run --allow-net --allow-env \
//     --allow-read=web/pkg web/edge/deno.mjs
//
// On Deno Deploy (DENO_DEPLOYMENT_ID set) the platform picks the address.
// env: HOST_URL (required), PORT (default 8081; 0 picks one), LISTEN_HOST
// (default 127.0.0.1), ACCESS_TTL_MS, VALIDATOR_WASM, VALIDATOR_SHA256 (a
// declared digest that must then match the bytes). It prints one line
// "edge gateway on http://HOST:PORT …" once it listens.

import gateway from './gateway.mjs';

const setting = (name) => Deno.env.get(name) ?? undefined;
const wasm = setting('VALIDATOR_WASM') ?? new URL('../pkg/web/validate_bg.wasm', import.meta.url);
const bytes = await Deno.readFile(wasm);
const env = {
  HOST_URL: setting('HOST_URL') ?? 'http://127.0.0.1:8080',
  ACCESS_TTL_MS: setting('ACCESS_TTL_MS'),
  VALIDATOR: await WebAssembly.compile(bytes),
  VALIDATOR_BYTES: bytes,
  VALIDATOR_SHA256: setting('VALIDATOR_SHA256'),
};

const handler = (request) => gateway.fetch(request, env);
if (Deno.env.get('DENO_DEPLOYMENT_ID')) {
  // Deno Deploy chooses the address itself.
  Deno.serve(handler);
} else {
  Deno.serve(
    {
      hostname: setting('LISTEN_HOST') ?? '127.0.0.1',
      port: Number(setting('PORT') ?? 8081),
      onListen: ({ hostname, port }) =>
        console.log(`edge gateway on http://${hostname}:${port} in front of ${env.HOST_URL} (deno ${Deno.version.deno})`),
    },
    handler,
  );
}
