#!/usr/bin/env bash
# Builds the validator artifact: the crate for wasm32-unknown-unknown
# (without the `arrow` feature: hosts build Arrow natively), run
# through wasm-bindgen into the npm package @omnigraph/validate
# (web/pkg/web and web/pkg/nodejs). These are the commands wasm-pack ran
# (`--mode no-install`), without wasm-pack: compiling it from source cost a
# fresh machine 1 min 37 s of its test run. No wasm-opt: Debian's binaryen
# miscompiles wasm-bindgen output (and docs/lab/2026-12-06-wasm-opt.md). Both targets ship the same .wasm bytes;
# the host embeds that file. Installs what is missing, idempotently, and
# prints the artifact's SHA-256.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/omnigraph-ingest/target}"
scripts/setup.sh

# wasm-bindgen-cli must be exactly the version in Cargo.lock; it is installed
# without --locked (its own lockfile pins crates this registry may lack), and
# unoptimised: it compiles in 51 s instead of 2 min on a fresh machine, and
# writes the same bytes in under a second (scripts/test.sh compares web/pkg
# with the committed files).
WBG_VERSION=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$WBG_VERSION" ]; then
  echo "build-wasm: installing wasm-bindgen-cli $WBG_VERSION"
  CARGO_PROFILE_RELEASE_OPT_LEVEL=0 cargo install wasm-bindgen-cli --version "$WBG_VERSION" --force
fi

# Identical bytes on every machine: no absolute paths in the module. The
# linker drops the name section (debug info); the profile `wasm` adds LTO;
# `simd128` is fixed-width SIMD (never relaxed SIMD: deterministic in every
# engine), tests/wasm-features.json lists it.
CARGO_HOME_DIR="${CARGO_HOME:-$HOME/.cargo}"
export RUSTFLAGS="--remap-path-prefix=$CARGO_HOME_DIR=cargo-home --remap-path-prefix=$ROOT=omnigraph --remap-path-prefix=$CARGO_TARGET_DIR=target -C link-arg=--strip-debug -C target-feature=+simd128"

VERSION=$(awk -F'"' '/^version = /{print $2; exit}' Cargo.toml)
cargo build --quiet --locked -p omnigraph-validate-wasm --lib --profile wasm --target wasm32-unknown-unknown --no-default-features
for target in web nodejs; do
  wasm-bindgen "$CARGO_TARGET_DIR/wasm32-unknown-unknown/wasm/omnigraph_validate_wasm.wasm" \
    --out-dir "$ROOT/web/pkg/$target" --typescript --target "$target" --out-name validate
  # Publish as @omnigraph/validate.
  python3 - "$ROOT/web/pkg/$target" "$VERSION" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
pkg = {
    "name": "@omnigraph/validate",
    "version": sys.argv[2],
    "description": "OmniGraph ingest validator: schema language, strict NDJSON parser, batch validator (wasm)",
    "license": "Apache-2.0",
    "files": sorted(p.name for p in out.iterdir() if p.name != "package.json"),
    "types": "validate.d.ts",
}
pkg["module" if out.name == "web" else "main"] = "validate.js"
if out.name == "web":
    pkg["type"] = "module"
(out / "package.json").write_text(json.dumps(pkg, indent=2) + "\n")
PY
done

# wasm-bindgen writes a name section (function names for stack traces);
# drop it: ~130 KB the download does not need. A copy keeps it, for
# scripts/profile-wasm.sh to name the functions of a profile.
cp web/pkg/web/validate_bg.wasm "$CARGO_TARGET_DIR/validate_bg.named.wasm"
python3 scripts/strip-wasm-names.py web/pkg/web/validate_bg.wasm web/pkg/nodejs/validate_bg.wasm

if ! cmp -s web/pkg/web/validate_bg.wasm web/pkg/nodejs/validate_bg.wasm; then
  echo "build-wasm: the web and nodejs targets produced different .wasm bytes" >&2
  exit 1
fi
SHA=$(sha256sum web/pkg/web/validate_bg.wasm | awk '{print $1}')
echo "$SHA" > web/pkg/validate_bg.wasm.sha256
echo "artifact web/pkg/web/validate_bg.wasm: $(stat -c %s web/pkg/web/validate_bg.wasm) bytes, sha256 $SHA"
