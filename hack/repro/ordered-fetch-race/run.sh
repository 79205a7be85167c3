#!/usr/bin/env bash
# Starts three plain nats-server processes (JetStream, one cluster, routes to
# all three, default route pooling) on 127.0.0.1, runs the repro from a
# client on each, and stops them. POOL=-1 disables route pooling (one route
# per pair carrying every account): the failures disappear.
#   hack/repro/ordered-fetch-race/run.sh             (nats-server 2.15.2 from hack/testbin.sh)
#   NATS_SERVER=/path/to/nats-server POOL=-1 N=1000 DELAY=1ms ./run.sh
set -euo pipefail
cd "$(dirname "$0")"
BIN="${NATS_SERVER:-$(../../testbin.sh nats 2.15.2)/nats-server}"
POOL="${POOL:-}"
N="${N:-1000}"
DELAY="${DELAY:-0s}"
DIR="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$DIR"; }
trap cleanup EXIT
for i in 1 2 3; do
  cat > "$DIR/s$i.conf" <<CONF
server_name: s$i
listen: 127.0.0.1:430$i
http: 127.0.0.1:830$i
jetstream { store_dir: "$DIR/js$i" }
cluster {
  name: repro
  listen: 127.0.0.1:630$i
  routes: [nats://127.0.0.1:6301, nats://127.0.0.1:6302, nats://127.0.0.1:6303]
  ${POOL:+pool_size: $POOL}
}
CONF
  "$BIN" -c "$DIR/s$i.conf" > "$DIR/s$i.log" 2>&1 &
  pids+=($!)
done
for i in 1 2 3; do
  until curl -sf "http://127.0.0.1:830$i/healthz" >/dev/null; do sleep 0.2; done
done
"$BIN" --version
go build -o "$DIR/minirepro" .
for i in 1 2 3; do "$DIR/minirepro" -s "nats://127.0.0.1:430$i" -n "$N" -delay "$DELAY"; done
