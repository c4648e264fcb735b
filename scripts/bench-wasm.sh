#!/usr/bin/env bash
# One run, one generated ~32 MiB batch, four runtimes: native and wasmtime
# (criterion, crates/omnigraph-host/benches/wasm_runner.rs), Node and
# Chromium (web/bench). Also the per-batch overhead in wasmtime and the
# artifact's size. Figures go to docs/performance.md by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
scripts/build-wasm.sh
(cd web && npm ci --no-audit --no-fund --silent)

BATCH="$CARGO_TARGET_DIR/bench-batch.ndjson"
cargo run --locked --quiet --release -p omnigraph-validate-wasm --example gen-bench-batch -- "$BATCH"

echo "== artifact"
echo "raw $(stat -c %s web/pkg/web/validate_bg.wasm) bytes, gzip -9 $(gzip -9c web/pkg/web/validate_bg.wasm | wc -c) bytes"
echo "== native and wasmtime (criterion)"
cargo bench --locked -p omnigraph-host --bench wasm_runner 2>&1 | grep -E '^[a-z0-9_/]+ +time:|^[a-zA-Z0-9_/]+$|time:|thrpt:' | grep -v '%'
echo "== node"
node web/bench/node-bench.mjs "$BATCH" "$BATCH.options.json"
echo "== chromium"
node web/bench/browser-bench.mjs "$BATCH" "$BATCH.options.json"
