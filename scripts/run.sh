#!/usr/bin/env bash
# Sets up and runs the main job available today on the embedded default:
# 1. validates a batch the way the host does (the validator artifact in
#    wasmtime) and prints the report (SPEC §3);
# 2. creates the local demo graph on first run (samples/people.pg, loaded
#    with samples/people.ndjson in one graph commit) and prints its commit log
#    and contents.
# Usage: scripts/run.sh [SCHEMA.pg BATCH.ndjson [OPTIONS.json]]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
scripts/setup.sh >&2
scripts/build-wasm.sh >&2
if [ $# -eq 0 ]; then
  set -- samples/people.pg samples/people.ndjson
fi
# The dev profile shares the test build (dependencies are optimised there too).
cargo build --locked --quiet -p omnigraph-host --bins --examples
status=0
"$CARGO_TARGET_DIR/debug/examples/validate" "$@" || status=$?

demo="${OMNIGRAPH_DEMO_ROOT:-$HOME/.cache/omnigraph-ingest/demo-graph}"
host="$CARGO_TARGET_DIR/debug/omnigraph-host"
if [ ! -e "$demo/_graph/graph.json" ]; then
  echo "== creating the demo graph at $demo" >&2
  "$host" init --root "$demo" samples/people.pg
  "$host" load --root "$demo" --actor demo samples/people.ndjson >/dev/null
fi
echo "== demo graph $demo: commits (newest first)" >&2
"$host" log --root "$demo"
echo "== demo graph: every record of main" >&2
"$host" export --root "$demo"
exit "$status"
