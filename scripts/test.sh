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

echo "== the validator artifact rebuilds to the committed bytes"
scripts/build-wasm.sh
if [ -n "$(git status --porcelain -- web/pkg 2>/dev/null)" ]; then
  git status --short -- web/pkg
  if [ "${CI:-}" = "true" ]; then
    echo "web/pkg differs from a fresh build: commit the output of scripts/build-wasm.sh" >&2
    exit 1
  fi
  echo "warning: web/pkg changed; commit it with the source change that caused it" >&2
fi

echo "== no import cycles between the modules of any crate"
python3 scripts/module-cycles.py crates/omnigraph-validate-wasm crates/omnigraph-host crates/omnigraph-fuzz-harness

echo "== clippy, warnings denied: the validator (native and wasm32) and the fuzz harness (their dependencies are light; the host's Lance would add minutes to a fresh run)"
cargo clippy --locked -q -p omnigraph-validate-wasm -p omnigraph-fuzz-harness --all-targets --all-features -- -D warnings
cargo clippy --locked -q -p omnigraph-validate-wasm --target wasm32-unknown-unknown --lib -- -D warnings

cleanup() { stop_nats; [ -z "${moto_pid:-}" ] || stop_moto; rm -rf "${graph_dir:-}"; }
trap cleanup EXIT
. scripts/nats.sh

echo "== cargo test (workspace: rule book, fuzz regressions, wasmtime runner and parity, commit engine with crash points; the stream consumer's tests on nats-server $OMNIGRAPH_TEST_NATS)"
cargo test --locked --workspace --features omnigraph-host/failpoints

echo "== the engine, crash, process, CLI, HTTP, multi-host, promise, fault, split-load, request-count, maintenance and cleanup suites again on S3 (moto on 127.0.0.1)"
. scripts/moto.sh
OMNIGRAPH_TEST_STORE=s3 OMNIGRAPH_TEST_S3_ENDPOINT="$MOTO_ENDPOINT" \
  cargo test --locked -p omnigraph-host --features failpoints \
  --test engine --test crash --test kill --test processes --test cli --test http --test multihost \
  --test promises --test faults --test split_load --test requests --test maintain --test cleanup

echo "== the stream consumer killed at random instants, on S3"
OMNIGRAPH_TEST_STORE=s3 OMNIGRAPH_TEST_S3_ENDPOINT="$MOTO_ENDPOINT" \
  cargo test --locked -p omnigraph-host --features failpoints --test consume consumers_killed_at_random_instants

echo "== pylance reads every graph commit as the host exports it (docs/storage.md)"
graph_dir="$(mktemp -d)"
host="$CARGO_TARGET_DIR/debug/omnigraph-host"
"$host" init --root "$graph_dir/g" samples/people.pg
"$host" load --root "$graph_dir/g" samples/people.ndjson >/dev/null
printf '%s\n' '{"type":"Person","data":{"name":"Ada","age":37}}' '{"type":"Person","data":{"name":"Linus"}}' >"$graph_dir/more.ndjson"
"$host" load --root "$graph_dir/g" "$graph_dir/more.ndjson" >/dev/null
"$host" load --root "$graph_dir/g" --branch side --from main "$graph_dir/more.ndjson" >/dev/null
"$host" load --root "$graph_dir/g" --branch side --mode overwrite samples/people.ndjson >/dev/null
"$PYVENV/bin/python" tests/python/read_graph.py "$host" "$graph_dir/g" main side

echo "== web: node and chromium parity, the page end to end, the splitter, the gateway in workerd, deno and node (node --test)"
(cd web && node --test test/*.test.mjs)

echo "== the page validating a 200 MiB file: memory stays one batch (renderer peak RSS vs a 50 MiB file)"
node web/bench/page-memory.mjs 50 200

echo "== python parity: the package (python/) in wasmtime-py, the whole corpus byte for byte"
scripts/test-python.sh
