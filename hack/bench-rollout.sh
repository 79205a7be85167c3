#!/usr/bin/env bash
# bench-rollout.sh runs the rollout benchmark of issue 37 (test/bench/rollout)
# on the local stack: for 3 and 5 servers, idle and under load, a version
# change 2.15.2 <-> 2.15.1, and prints per step the controller's
# gate-to-step and step duration histograms, the rollout's wall time against
# the sum of the servers' bare restart-plus-catch-up, and the longest pause
# a synchronous JetStream publisher saw. Run by hand, not in CI; the full run
# takes about 5 minutes on 2 cores.
#
#   hack/bench-rollout.sh                             # the full run
#   hack/bench-rollout.sh --servers 3 --loads idle    # a quick one
#   hack/bench-rollout.sh --lame-duck-grace 1s        # the e2e clusters' grace period
#
# Figures go to stdout ("name: value unit"), progress to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash hack/testbin.sh control-plane >/dev/null
bash hack/testbin.sh nats 2.15.2 >/dev/null
bash hack/testbin.sh nats 2.15.1 >/dev/null
bash hack/testbin.sh exporter >/dev/null
go build -o "${TMPDIR:-/tmp}/nats-operator-bench-rollout" ./test/bench/rollout
exec "${TMPDIR:-/tmp}/nats-operator-bench-rollout" "$@"
