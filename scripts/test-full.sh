#!/usr/bin/env bash
# The full counts kept out of scripts/test.sh (run it first: it sets the
# machine up): on S3 too (moto on 127.0.0.1), the seeded property tests with
# every seed, the kill test with all its runs, and the stream consumer's
# suite with its 20 kills. By hand or on a schedule
# (on moto the cleanup property's three seeds took 282 s of one fresh
# machine's run, the kill test's 20 runs 122 s).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
trap 'stop_moto; stop_nats' EXIT
. scripts/moto.sh
. scripts/nats.sh
OMNIGRAPH_TEST_FULL=1 OMNIGRAPH_TEST_STORE=s3 OMNIGRAPH_TEST_S3_ENDPOINT="$MOTO_ENDPOINT" \
  cargo test --locked -p omnigraph-host --features failpoints --test cleanup --test kill --test consume
