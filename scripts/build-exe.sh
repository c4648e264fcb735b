#!/usr/bin/env bash
# Builds one executable with cargo and copies it into DIR at once; prints the
# copy's path. The shared target dir's stable paths (debug/omnigraph-host,
# debug/examples/validate) hold whichever profile and checkout built them
# last: a `cargo test` (our crates at opt-level 0) from another checkout, a CI
# run say, rewrites them within minutes, and a bench that timed that build
# would read ~8x slow. A script that runs for minutes uses its own copy.
# Usage: scripts/build-exe.sh DIR CARGO_BUILD_ARGS... (one bin or example)
set -euo pipefail
dir="$1"
shift
exe="$(cargo build --locked --quiet --message-format=json "$@" | python3 -c '
import json, sys
found = [m["executable"] for m in map(json.loads, sys.stdin)
         if m.get("reason") == "compiler-artifact" and m.get("executable")]
if len(found) != 1:
    sys.exit(f"build-exe: expected one executable, cargo built {found}")
print(found[0])')"
mkdir -p "$dir"
cp "$exe" "$dir/"
echo "$dir/$(basename "$exe")"
