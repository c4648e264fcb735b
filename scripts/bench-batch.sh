#!/usr/bin/env bash
# What the validator's bench scripts (bench-wasm.sh, profile-wasm.sh,
# count-wasm.sh, count-loops.sh) start from: the artifact built (its report on stderr) and
# the generated benchmark batch (~32 MiB, benches/batchgen.rs) with its
# options file beside it; prints the batch's path.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
scripts/build-wasm.sh >&2
batch="$CARGO_TARGET_DIR/bench-batch.ndjson"
cargo run --locked --quiet --release -p omnigraph-validate-wasm --example gen-bench-batch -- "$batch" >&2
echo "$batch"
