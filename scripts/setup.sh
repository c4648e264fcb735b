#!/usr/bin/env bash
# Installs what this project needs on a fresh machine of its kind, idempotently:
# the pinned Rust toolchain's wasm32 target. Later components add their tools here.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "setup: adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi
rustup target list --installed | grep -qx wasm32-unknown-unknown || { echo "setup: missing wasm32 target" >&2; exit 1; }
command -v python3 >/dev/null || { echo "setup: python3 is required (corpus generator check)" >&2; exit 1; }
