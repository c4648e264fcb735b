#!/usr/bin/env bash
# How often the artifact's function entries and loop headers run while it
# validates the bench batch once: the places where wasmtime's Cranelift
# code checks the epoch, and where it keeps the epoch's pointer and
# deadline live (spilling the loop's own values around them). A diagnostic
# for "fewer loop turns per byte" (docs/lab/2026-12-04-epoch-checks.md): the counts are a
# property of the artifact, the same in every engine, so it runs in Node.
# tools/wasm-loop-count adds a counter at each site of the named copy of
# the artifact that build-wasm.sh keeps. Not a benchmark: no target lines.
# Usage: scripts/count-loops.sh [TOP]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
top="${1:-30}"

BATCH="$(scripts/bench-batch.sh)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp web/pkg/nodejs/validate.js web/pkg/nodejs/package.json "$work/"
cargo run --locked --quiet --release --manifest-path tools/wasm-loop-count/Cargo.toml -- \
  "$CARGO_TARGET_DIR/validate_bg.named.wasm" "$work/validate_bg.wasm" >"$work/sites.tsv"
node tools/wasm-loop-count/count.mjs "$work" "$work/sites.tsv" tests/bench/schema.pg "$BATCH" "$BATCH.options.json" "$top"
