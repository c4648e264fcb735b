#!/usr/bin/env bash
# Accepts the validator's current reports as the corpus expectations, printing
# a diff for every case that changes. Review the diff before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
BLESS=1 cargo test -p omnigraph-validate-wasm --test vectors corpus_reports_match -- --nocapture
