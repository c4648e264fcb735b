#!/usr/bin/env bash
# Installs what this project needs on a fresh machine of its kind, idempotently:
# the pinned toolchain's wasm32 target, Debian's Chromium (browser tests) and
# the web/ node packages. scripts/build-wasm.sh adds wasm-bindgen and wasm-pack.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "setup: adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi
rustup target list --installed | grep -qx wasm32-unknown-unknown || { echo "setup: missing wasm32 target" >&2; exit 1; }

for tool in python3 node npm; do
  command -v "$tool" >/dev/null || { echo "setup: $tool is required" >&2; exit 1; }
done

if [ ! -x /usr/bin/chromium ]; then
  echo "setup: installing Debian's chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
fi

if [ ! -d web/node_modules/playwright-core ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
  echo "setup: installing web/ node packages"
  (cd web && npm ci --no-audit --no-fund --silent)
fi
