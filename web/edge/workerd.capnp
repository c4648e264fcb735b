# The edge gateway in workerd (Cloudflare's open-source Workers runtime):
#
#   HOST_URL=http://127.0.0.1:8080 npx workerd serve web/edge/workerd.capnp \
#     --socket-addr http=127.0.0.1:8081
#
# Paths are relative to this file. The modules keep the repository's layout
# (edge/…, pkg/web/…) so the relative imports of gateway.mjs resolve as they
# do on disk. The validator is a wasm module import; its SHA-256 is measured
# from the same file embedded as a data binding (VALIDATOR_BYTES) and must
# equal the committed web/pkg/validate_bg.wasm.sha256 (VALIDATOR_SHA256).

using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "gateway", worker = .gateway),
    # The host is usually on a private or local address, which the implicit
    # "internet" service refuses (it allows "public" only, against SSRF).
    (name = "host-network", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:8081", http = (), service = "gateway")],
);

const gateway :Workerd.Worker = (
  modules = [
    (name = "edge/workerd.mjs", esModule = embed "workerd.mjs"),
    (name = "edge/gateway.mjs", esModule = embed "gateway.mjs"),
    (name = "pkg/web/validate.js", esModule = embed "../pkg/web/validate.js"),
    (name = "pkg/web/validate_bg.wasm", wasm = embed "../pkg/web/validate_bg.wasm"),
  ],
  bindings = [
    (name = "HOST_URL", fromEnvironment = "HOST_URL"),
    (name = "ACCESS_TTL_MS", fromEnvironment = "ACCESS_TTL_MS"),
    (name = "VALIDATOR_BYTES", data = embed "../pkg/web/validate_bg.wasm"),
    (name = "VALIDATOR_SHA256", text = embed "../pkg/validate_bg.wasm.sha256"),
  ],
  globalOutbound = "host-network",
  compatibilityDate = "2026-01-01",
);
