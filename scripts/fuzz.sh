#!/usr/bin/env bash
# Fuzzes the rule book with cargo fuzz (nightly toolchain, libFuzzer + ASan).
#   scripts/fuzz.sh [CPU seconds per target] [target ...]
# Each fuzzer runs until its own CPU time (user + system, from /proc) reaches
# the budget, then gets SIGINT: a budget in wall time would shrink whenever
# builds share the cores. A wall-time ceiling of 8x the budget ends a run
# that cannot get the CPU at all; it is reported and fails the script.
# Targets: schema strict compat prepare differential (default: all). Seeds are derived
# from tests/vectors into fuzz/corpus/<target>/ (not committed); crashes
# land in fuzz/artifacts/<target>/. Fixed crash inputs are kept in
# fuzz/regressions/<target>/, which `cargo test` replays on stable.
# Logs: fuzz/logs/<target>.log (coverage over time, for the run notes in
# docs/lab/*-reliability-fuzz*.md; the totals are in docs/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
seconds="${1:-600}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(schema strict compat prepare differential)

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2
cargo run --quiet -p omnigraph-fuzz-harness --example write_seeds -- fuzz/corpus
# cargo fuzz builds in fuzz/target (nightly + sanitizer artifacts stay apart).
env -u CARGO_TARGET_DIR cargo +nightly fuzz build -O
mkdir -p fuzz/logs
fuzzers="fuzz/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"
ticks_per_second=$(getconf CLK_TCK)
# CPU seconds (user + system) of process $1 so far.
cpu_seconds() { awk -v t="$ticks_per_second" '{ print int(($14 + $15) / t) }' "/proc/$1/stat" 2>/dev/null || echo 0; }
failed=()
for target in "${targets[@]}"; do
  case "$target" in
    schema) dict=fuzz/dict/schema.dict ;;
    *) dict=fuzz/dict/ndjson.dict ;;
  esac
  echo "== fuzz $target for ${seconds} CPU seconds"
  mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
  # Bounds that make slowness and excessive allocation crashes: an input of
  # at most 64 KiB may not take 10 s, one malloc over 256 MiB or 2 GiB RSS.
  "$fuzzers/$target" -artifact_prefix="fuzz/artifacts/$target/" "fuzz/corpus/$target" \
    -dict="$dict" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 \
    -max_total_time=$((8 * seconds)) -print_final_stats=1 >"fuzz/logs/$target.log" 2>&1 &
  fuzzer=$!
  cpu=0 stopped=no
  while kill -0 "$fuzzer" 2>/dev/null; do
    sleep 5
    now=$(cpu_seconds "$fuzzer")
    [ "$now" -gt 0 ] && cpu=$now
    if [ "$stopped" = no ] && [ "$cpu" -ge "$seconds" ]; then kill -INT "$fuzzer"; stopped=yes; fi
  done
  status=0
  wait "$fuzzer" || status=$?
  echo "stat::cpu_seconds: $cpu" >>"fuzz/logs/$target.log"
  # libFuzzer answers SIGINT with exit status 72: the budget was reached, not a finding.
  if [ "$stopped" = yes ] && [ "$status" -eq 72 ]; then status=0; fi
  if [ "$status" -ne 0 ]; then
    failed+=("$target")
  elif [ "$stopped" = no ]; then
    echo "$target: the wall-time ceiling ended it after $cpu of $seconds CPU seconds" >&2
    failed+=("$target")
  fi
  grep -E "^#[0-9]+.*DONE|ERROR|SUMMARY|stat::" "fuzz/logs/$target.log" || true
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing failed in: ${failed[*]} (crash inputs in fuzz/artifacts/, logs in fuzz/logs/)" >&2
  exit 1
fi
