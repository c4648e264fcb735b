#!/usr/bin/env bash
# The main job on the embedded default: builds everything, creates the local
# demo graph on first run (samples/people.pg loaded with samples/people.ndjson)
# and serves every graph under the root with the API and page on
# http://127.0.0.1:8080 (no auth: local development). Ctrl-C stops it after
# in-flight loads finish.
# Env: OMNIGRAPH_ROOT (default ~/.cache/omnigraph-ingest/graphs), OMNIGRAPH_LISTEN.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
scripts/setup.sh >&2
scripts/build-wasm.sh >&2
# The dev profile shares the test build (dependencies are optimised there too).
cargo build --locked --quiet -p omnigraph-host --bins
root="${OMNIGRAPH_ROOT:-$HOME/.cache/omnigraph-ingest/graphs}"
exec "$CARGO_TARGET_DIR/debug/omnigraph-host" serve --root "$root" --open --demo \
  --listen "${OMNIGRAPH_LISTEN:-127.0.0.1:8080}"
