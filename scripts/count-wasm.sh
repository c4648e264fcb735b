#!/usr/bin/env bash
# Instructions per batch of the benchmark batch (~32 MiB), in wasmtime,
# native and V8 (Node), counted by valgrind's cachegrind: a diagnostic for comparing two
# builds of the validator on this shared machine, whose wall-clock speed
# moves by more than a change of a few percent (docs/performance.md). A
# count is not a time (a change that took 6 % of wasmtime's instructions
# took about 2 % of its time), but it is the same from run to run (two
# processes of 5.2 billion differed by 1,110), so whether a change removes
# work shows at once. Each side runs 1 and 1+CALLS batches in one process and the
# difference is divided by CALLS, so start-up and module loading cancel.
# V8 runs with `--no-liftoff --single-threaded`: every function compiled
# optimised before it first runs, no background compile threads, so the
# count does not depend on when tier-up finishes (the browsers' and Node's
# later calls run that code; their first call runs more baseline code).
# Not a benchmark: no target lines. Needs valgrind (Debian: valgrind).
# Usage: scripts/count-wasm.sh [CALLS]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
calls="${1:-2}"
command -v valgrind >/dev/null || { echo "count-wasm: needs valgrind (Debian: apt-get install valgrind)" >&2; exit 2; }

BATCH="$(scripts/bench-batch.sh)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Built as wasm_runner's two sides are (the `dev` profile), and copied out
# of the shared target dir (scripts/build-exe.sh).
native="$(scripts/build-exe.sh "$work" --profile dev -p omnigraph-validate-wasm --example validate)"
wasm="$(scripts/build-exe.sh "$work" --profile dev -p omnigraph-host --example validate-wasm)"
args=(tests/bench/schema.pg "$BATCH" "$BATCH.options.json")

instructions() {
  valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
    awk '/I +refs:/ {gsub(",", "", $NF); print $NF}'
}
# The first process under valgrind ran 7x the instructions of the next:
# the compiled-module cache is keyed by the CPU's features, and valgrind
# reports others, so it compiles once; the counts come after.
instructions "$wasm" "${args[@]}" 1 >/dev/null
per_batch() {
  local one more
  one=$(instructions "$@" 1)
  more=$(instructions "$@" $((1 + calls)))
  echo $(((more - one) / calls))
}
# `validate --time N` validates N times; `validate-wasm` takes N last.
n=$(per_batch "$native" "${args[@]}" --time)
w=$(per_batch "$wasm" "${args[@]}")
v8=$(per_batch node --no-liftoff --single-threaded web/bench/validate-n.mjs "${args[@]}")
echo "instructions per batch ($(stat -c %s "$BATCH") bytes), each side's difference of 1 and $((1 + calls)) batches over $calls:"
echo "native   $n"
echo "wasmtime $w"
echo "v8       $v8"
python3 -c 'import sys; n, w, v = map(int, sys.argv[1:]); print(f"wasmtime / native {w / n:.3f}, v8 / native {v / n:.3f}")' "$n" "$w" "$v8"
