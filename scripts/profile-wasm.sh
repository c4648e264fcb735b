#!/usr/bin/env bash
# Where the validator's time goes in wasmtime against the same code native,
# function by function, on the benchmark batch (~32 MiB): `perf` samples of
# RUNS whole `omnigraph-host validate` processes (the host built with the
# `wasm-profiling` feature, so wasmtime writes a perf map of the artifact's
# compiled code; functions named from build-wasm.sh's copy of the artifact
# with its name section) and of the native `validate` example validating
# RUNS times. Prints milliseconds per batch in each, heaviest in wasmtime
# first. Needs Linux `perf` (Debian: linux-perf); a diagnostic, not a
# benchmark: no target lines.
# Usage: scripts/profile-wasm.sh [RUNS] [ROWS]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
runs="${1:-5}"
rows="${2:-40}"
command -v perf >/dev/null || { echo "profile-wasm: needs Linux perf (Debian: apt-get install linux-perf)" >&2; exit 2; }

BATCH="$(scripts/bench-batch.sh)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Copies out of the shared target dir, whose paths the next build there
# (the host without the feature, a `cargo test`) rewrites.
scripts/build-exe.sh "$work" --profile dev -p omnigraph-validate-wasm --example validate >/dev/null
scripts/build-exe.sh "$work" --profile dev -p omnigraph-host --features wasm-profiling --bin omnigraph-host >/dev/null
python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["limits"]))' "$BATCH.options.json" >"$work/limits.json"
validate_wasm=("$work/omnigraph-host" validate --schema tests/bench/schema.pg --limits "$work/limits.json" "$BATCH")

# Once outside the profile: the first process compiles the module (the
# profiler is part of the cache key) and later ones load it.
OMNIGRAPH_WASM_PERFMAP=1 "${validate_wasm[@]}" >/dev/null
touch "$work/start"
OMNIGRAPH_WASM_PERFMAP=1 perf record -q -o "$work/wasm.data" -- \
  bash -c 'for _ in $(seq "$0"); do "${@}" >/dev/null; done' "$runs" "${validate_wasm[@]}"
perf record -q -o "$work/native.data" -- "$work/validate" tests/bench/schema.pg "$BATCH" "$BATCH.options.json" --time "$runs" >/dev/null

for kind in wasm native; do
  perf report -i "$work/$kind.data" --no-children --sort sym --stdio -g none 2>/dev/null >"$work/$kind.txt"
done
# wasmtime's perf maps (one per process) are read by the reports above.
find /tmp -maxdepth 1 -name 'perf-*.map' -newer "$work/start" -delete

PYTHONPATH=scripts python3 - "$work" "$runs" "$rows" "$CARGO_TARGET_DIR/validate_bg.named.wasm" <<'PY'
import re, sys
from wasm_names import function_names

work, runs, rows, named = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
names = function_names(open(named, "rb").read())

def ms_per_batch(kind):
    text = open(f"{work}/{kind}.txt").read()
    total_ms = float(re.search(r"Event count \(approx.\): (\d+)", text).group(1)) / 1e6
    out = {}
    for line in text.splitlines():
        found = re.match(r"\s+([\d.]+)%\s+\[.\]\s+(.*)", line)
        if not found:
            continue
        symbol = re.sub(r"^wasm\[0\]::", "", found.group(2).strip())
        symbol = re.sub(r"^function\[(\d+)\]", lambda m: names.get(int(m.group(1)), m.group(0)), symbol)
        symbol = re.sub(r"::h[0-9a-f]{16}$", "", symbol)
        out[symbol] = out.get(symbol, 0) + float(found.group(1)) * total_ms / 100 / runs
    return out

wasm, native = ms_per_batch("wasm"), ms_per_batch("native")
print(f"ms per batch, {runs} runs each (wasmtime: whole CLI processes; native: the validate example)")
print(f"{'function':<72} {'native':>8} {'wasmtime':>8} {'ratio':>6}")
for symbol in sorted(wasm, key=lambda s: -wasm[s])[:rows]:
    n = native.get(symbol, 0.0)
    ratio = f"{wasm[symbol] / n:6.1f}" if n >= 0.1 else "     -"
    print(f"{symbol[:72]:<72} {n:8.1f} {wasm[symbol]:8.1f} {ratio}")
print(f"{'all samples':<72} {sum(native.values()):8.1f} {sum(wasm.values()):8.1f}")
PY
