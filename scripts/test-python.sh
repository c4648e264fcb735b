#!/usr/bin/env bash
# The Python package (python/, importable as omnigraph_validate): installs it
# with `pip install ./python` (the build copies web/pkg/web/validate_bg.wasm
# into the package, checked against web/pkg/validate_bg.wasm.sha256) and
# pytest into the project venv, then runs python/tests against the installed
# package: the whole conformance corpus byte for byte, the artifact's
# SHA-256 and imports, the samples, and files split into batches.
#
#   scripts/test-python.sh            install (idempotent) and test
#   scripts/test-python.sh --install  install only (for scripts/setup.sh)
#   scripts/test-python.sh -k corpus  extra arguments go to pytest
#
# Needs the artifact in web/pkg (scripts/build-wasm.sh); never rebuilds it.
set -euo pipefail
cd "$(dirname "$0")/.."

PYVENV="${OMNIGRAPH_PYVENV:-$HOME/.cache/omnigraph-ingest/pyvenv}"
PYTEST_VERSION=9.2.0

install_only=false
if [ "${1:-}" = "--install" ]; then
  install_only=true
  shift
fi

if [ ! -x "$PYVENV/bin/python" ]; then
  echo "test-python: creating the venv $PYVENV"
  python3 -m venv "$PYVENV"
fi
# pip reinstalls a local project every time, so the installed package is
# always python/ as it is now (a few seconds; wasmtime and pytest are only
# fetched when missing or of another version).
"$PYVENV/bin/python" -m pip install -q --disable-pip-version-check ./python "pytest==$PYTEST_VERSION"
# Setup installs before scripts/build-wasm.sh may rebuild the artifact (a
# new ABI): only a test run loads it.
$install_only && exit 0
"$PYVENV/bin/python" -c 'import omnigraph_validate as og; print("test-python: omnigraph_validate runs", og.artifact_path(), og.artifact_sha256())'

# From python/, so the tests import the installed package, not python/src.
cd python
exec "$PYVENV/bin/python" -m pytest -q -p no:cacheprovider tests "$@"
