#!/usr/bin/env bash
# Sets up and runs the main job available today: validate a batch the way the
# host will, with the validator artifact (built by scripts/build-wasm.sh) in
# wasmtime, and print the report (SPEC §3). Defaults to the shipped sample
# graph. Usage: scripts/run.sh [SCHEMA.pg BATCH.ndjson [OPTIONS.json]]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
scripts/build-wasm.sh >&2
if [ $# -eq 0 ]; then
  set -- samples/people.pg samples/people.ndjson
fi
# The dev profile shares the test build (dependencies are optimised there too).
cargo run --locked --quiet -p omnigraph-host --example validate -- "$@"
