# Sourced by scripts/test.sh: starts nats-server (JetStream on, a store
# directory of its own) on a free port of 127.0.0.1, the server the stream
# consumer's tests share (tests that restart NATS start their own), and
# waits until it answers. Sets OMNIGRAPH_TEST_NATS (exported) and nats_pid;
# the caller's EXIT trap calls stop_nats.
PYVENV="${OMNIGRAPH_PYVENV:-$HOME/.cache/omnigraph-ingest/pyvenv}"
nats_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
nats_store="$(mktemp -d)"
"$PYVENV/bin/nats-server" -js -a 127.0.0.1 -p "$nats_port" -sd "$nats_store" >"$nats_store.log" 2>&1 &
nats_pid=$!
stop_nats() { kill "$nats_pid" 2>/dev/null || true; wait "$nats_pid" 2>/dev/null || true; rm -rf "$nats_store" "$nats_store.log"; }
for _ in $(seq 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $nats_port), 1).recv(1)" 2>/dev/null && break
  kill -0 "$nats_pid" 2>/dev/null || { cat "$nats_store.log" >&2; echo "nats-server did not start" >&2; exit 1; }
  sleep 0.2
done
export OMNIGRAPH_TEST_NATS="127.0.0.1:$nats_port"
