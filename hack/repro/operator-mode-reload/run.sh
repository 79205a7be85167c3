#!/usr/bin/env bash
# Builds the repro, which writes the configs of three nats-server processes
# (operator mode, one cluster on 127.0.0.1, ports 24001-24003, 24101-24103 and
# 24201-24203), starts them, reloads s2 and connects users through each
# server. Exits 1 when the defect shows, 0 when it does not.
#   hack/repro/operator-mode-reload/run.sh         (RESOLVER=full, nats-server 2.15.2 from hack/testbin.sh)
#   RESOLVER=full|cache|mem  resolver of s2 and s3 (mem: of all three)
#   PUSH=1   push B's JWT through s1 after the reload instead of preloading it on s1
#   SAME=1   reload s2 with its config file unchanged
#   WAIT=70s wait after the reload before connecting the users
#   NATS_SERVER=/path/to/nats-server
set -euo pipefail
cd "$(dirname "$0")"
BIN="${NATS_SERVER:-$(../../testbin.sh nats 2.15.2)/nats-server}"
DIR="$(mktemp -d)"
cleanup() { [ -f "$DIR/pids" ] && kill $(cat "$DIR/pids") 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
"$BIN" --version
go build -o "$DIR/minirepro" .
"$DIR/minirepro" -bin "$BIN" -dir "$DIR" -resolver "${RESOLVER:-full}" -push="${PUSH:-0}" -same="${SAME:-0}" -wait "${WAIT:-0s}"
