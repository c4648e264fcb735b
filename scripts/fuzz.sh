#!/usr/bin/env bash
# Fuzzes the rule book with cargo fuzz (nightly toolchain, libFuzzer + ASan).
#   scripts/fuzz.sh [seconds per target] [target ...]
# Targets: schema strict compat prepare differential (default: all). Seeds are derived
# from tests/vectors into fuzz/corpus/<target>/ (not committed); crashes
# land in fuzz/artifacts/<target>/. Fixed crash inputs are kept in
# fuzz/regressions/<target>/, which `cargo test` replays on stable.
# Logs: fuzz/logs/<target>.log (coverage over time, for docs/reliability.md).
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
failed=()
for target in "${targets[@]}"; do
  case "$target" in
    schema) dict=fuzz/dict/schema.dict ;;
    *) dict=fuzz/dict/ndjson.dict ;;
  esac
  echo "== fuzz $target for ${seconds}s"
  # Bounds that make slowness and excessive allocation crashes: an input of
  # at most 64 KiB may not take 10 s, one malloc over 256 MiB or 2 GiB RSS.
  env -u CARGO_TARGET_DIR cargo +nightly fuzz run -O "$target" "fuzz/corpus/$target" -- \
    -dict="$dict" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 \
    -max_total_time="$seconds" -print_final_stats=1 >"fuzz/logs/$target.log" 2>&1 || failed+=("$target")
  grep -E "^#[0-9]+.*DONE|ERROR|SUMMARY|stat::" "fuzz/logs/$target.log" || true
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing found crashes in: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
  exit 1
fi
