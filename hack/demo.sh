#!/usr/bin/env bash
# demo.sh is `make demo`: builds what it needs and runs test/demo (see there).
#
# Ctrl-C stops the demo cleanly, and `make demo` then exits 0. make itself
# dies of a SIGINT it receives (exit 130, "make: *** [Makefile:..: demo]"),
# whatever its recipe does with it, so on a terminal the demo runs under job
# control (set -m) as a job of its own: the terminal gives its Ctrl-C to the
# job's process group alone, not to make. The demo stops everything it
# started, says so and exits 0; this script exits with the demo's status.
# Without a terminal there is no Ctrl-C: the demo runs in make's process
# group, and a signal to that group reaches it directly (it stops everything
# on SIGINT, SIGTERM and SIGHUP, and on SIGTERM when this script dies).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash hack/testbin.sh control-plane >/dev/null
bash hack/testbin.sh nats 2.15.2 >/dev/null
bash hack/testbin.sh nats 2.15.1 >/dev/null
go build -o bin/demo ./test/demo

if [ -t 0 ] && [ -t 1 ]; then
  set -m
fi
status=0
bin/demo || status=$?
if [ "$status" -ne 0 ]; then
  echo "demo: exited with status $status" >&2
fi
exit "$status"
