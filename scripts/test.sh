#!/usr/bin/env bash
# Sets up a fresh machine and runs every test. `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

scripts/setup.sh

echo "== corpus inputs match their generator"
python3 tests/vectors/generate.py >/dev/null
if [ -n "$(git status --porcelain -- tests/vectors 2>/dev/null)" ]; then
  git status --short -- tests/vectors | head -20
  echo "tests/vectors differs from tests/vectors/generate.py: regenerate and bless (scripts/bless-vectors.sh)" >&2
  exit 1
fi

echo "== validator builds for wasm32-unknown-unknown"
cargo build --locked -p omnigraph-validate-wasm --target wasm32-unknown-unknown --release

echo "== cargo test (workspace)"
cargo test --locked --workspace
