#!/usr/bin/env bash
# Where the validator's time goes in wasmtime against the same code native,
# function by function, on the benchmark batch (~32 MiB): `perf` samples of
# RUNS whole `omnigraph-host validate` processes (the host as tests build
# it) and of the native `validate` example validating RUNS times. Prints
# milliseconds per batch in each, heaviest in wasmtime first. Needs Linux
# `perf` (Debian: linux-perf); a diagnostic, not a benchmark: no target
# lines.
#
# wasmtime's code is the module compiled into a fresh module cache: a
# `.cwasm` is an ELF file whose `.text` holds every function under its
# index (`wasm[0]::function[N]`). A process copies that `.text` into one
# anonymous executable mapping, which perf does not see (it is made
# executable by `mprotect`), so the script reads the mapping's address from
# /proc while the process runs and places each sample by its offset in
# it; the functions are named from build-wasm.sh's copy of the artifact
# with its name section.
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
# rewrites.
scripts/build-exe.sh "$work" --profile dev -p omnigraph-validate-wasm --example validate >/dev/null
scripts/build-exe.sh "$work" --profile dev -p omnigraph-host --bin omnigraph-host >/dev/null
python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["limits"]))' "$BATCH.options.json" >"$work/limits.json"
export OMNIGRAPH_MODULE_CACHE="$work/modules"
validate_wasm=("$work/omnigraph-host" validate --schema tests/bench/schema.pg --limits "$work/limits.json" "$BATCH")
# Once outside the profile: it compiles the module into the empty cache.
"${validate_wasm[@]}" >/dev/null
modules=("$OMNIGRAPH_MODULE_CACHE"/*.cwasm)
[ "${#modules[@]}" = 1 ] || { echo "profile-wasm: expected one compiled module, found ${modules[*]}" >&2; exit 1; }
for run in $(seq "$runs"); do
  perf record -q -o "$work/wasm-$run.data" -- "${validate_wasm[@]}" >/dev/null &
  profiled=$!
  # The process's executable anonymous mappings, read until one is there.
  for _ in $(seq 1000); do
    pid="$(pgrep -P "$profiled" -x omnigraph-host || true)"
    if [ -n "$pid" ] && grep -E '^[0-9a-f]+-[0-9a-f]+ r-xp 00000000 00:00 0 *$' "/proc/$pid/maps" >"$work/code-$run" 2>/dev/null; then
      break
    fi
    sleep 0.002
  done
  wait "$profiled"
done
perf record -q -o "$work/native.data" -- "$work/validate" tests/bench/schema.pg "$BATCH" "$BATCH.options.json" --time "$runs" >/dev/null
for kind in native $(seq -f 'wasm-%g' "$runs"); do
  perf script -i "$work/$kind.data" -F ip,sym,period 2>/dev/null >"$work/$kind.txt"
done

PYTHONPATH=scripts python3 - "$work" "$runs" "$rows" "${modules[0]}" "$CARGO_TARGET_DIR/validate_bg.named.wasm" <<'PY'
import bisect, collections, re, subprocess, sys
from wasm_names import function_names

work, runs, rows, module, named = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
names = function_names(open(named, "rb").read())

def readable(symbol):
    symbol = re.sub(r"^wasm\[0\]::function\[(\d+)\]", lambda m: names.get(int(m.group(1)), m.group(0)), symbol)
    return re.sub(r"::h[0-9a-f]{16}$", "", symbol)

# The module's functions: (offset in .text, size, name), by offset.
functions = []
symbols = subprocess.run(["objdump", "-t", module], capture_output=True, text=True, check=True).stdout
for line in symbols.splitlines():
    found = re.match(r"([0-9a-f]+) .*\s\.text\s+([0-9a-f]+) (.*)", line)
    if found:
        functions.append((int(found.group(1), 16), int(found.group(2), 16), readable(found.group(3))))
functions.sort()
starts = [f[0] for f in functions]
text_size = int(re.search(r"\.text\s+([0-9a-f]+)", subprocess.run(["objdump", "-h", module], capture_output=True, text=True, check=True).stdout).group(1), 16)

def compiled_code(run):
    """The mapping of `run`'s process that holds the module's .text (its size)."""
    for line in open(f"{work}/code-{run}"):
        low, high = (int(x, 16) for x in line.split()[0].split("-"))
        if high - low == text_size:
            return low, high
    sys.exit(f"profile-wasm: run {run}: no executable mapping of {text_size} bytes (the module's code) was seen")

def ms_per_batch(kind, code=None):
    out = collections.Counter()
    for line in open(f"{work}/{kind}.txt"):
        parts = line.split()
        if len(parts) < 3:
            continue
        period, ip, symbol = int(parts[0]), int(parts[1], 16), " ".join(parts[2:])
        if code and code[0] <= ip < code[1]:
            at = bisect.bisect_right(starts, ip - code[0]) - 1
            symbol = functions[at][2] if at >= 0 and ip - code[0] < starts[at] + functions[at][1] else "(wasmtime's code, no function)"
        out[readable(symbol)] += period / 1e6 / runs
    return out

wasm = collections.Counter()
for run in range(1, runs + 1):
    wasm.update(ms_per_batch(f"wasm-{run}", compiled_code(run)))
native = ms_per_batch("native")
print(f"ms per batch, {runs} runs each (wasmtime: whole CLI processes; native: the validate example)")
print(f"{'function':<72} {'native':>8} {'wasmtime':>8} {'ratio':>6}")
for symbol, ms in wasm.most_common(rows):
    n = native.get(symbol, 0.0)
    ratio = f"{ms / n:6.1f}" if n >= 0.1 else "     -"
    print(f"{symbol[:72]:<72} {n:8.1f} {ms:8.1f} {ratio}")
print(f"{'all samples':<72} {sum(native.values()):8.1f} {sum(wasm.values()):8.1f}")
PY
