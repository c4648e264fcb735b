# Sourced by scripts/test.sh and scripts/test-full.sh: starts moto (the
# S3-compatible server the S3 suites run against) on a free port of
# 127.0.0.1 and waits until it answers. Sets MOTO_ENDPOINT and moto_pid;
# the caller's EXIT trap calls stop_moto.
PYVENV="${OMNIGRAPH_PYVENV:-$HOME/.cache/omnigraph-ingest/pyvenv}"
moto_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
moto_log="$(mktemp)"
"$PYVENV/bin/moto_server" -H 127.0.0.1 -p "$moto_port" >"$moto_log" 2>&1 &
moto_pid=$!
stop_moto() { kill "$moto_pid" 2>/dev/null || true; rm -f "$moto_log"; }
for _ in $(seq 100); do
  python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$moto_port/')" 2>/dev/null && break
  kill -0 "$moto_pid" 2>/dev/null || { cat "$moto_log" >&2; echo "moto_server did not start" >&2; exit 1; }
  sleep 0.2
done
MOTO_ENDPOINT="http://127.0.0.1:$moto_port"
