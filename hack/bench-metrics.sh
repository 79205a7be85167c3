#!/usr/bin/env bash
# bench-metrics.sh runs the /metrics load benchmark of issue 60, check 5
# (test/bench/metricsload) on the local stack: a 3-server JetStream cluster
# rolled 2.15.2 -> 2.15.1 and back without load, then again during a flood
# of 300 requests/s for 60 s to the controller's HTTPS /metrics, each with
# a new random bearer token. It prints the flood's achieved rate and its
# answers by status (401/429/other), the leader-election Lease's
# transitions and longest renewal interval, and per rollout its wall time
# and each step's delay from its gate opening
# (nats_operator_gate_to_step_seconds) with min/median/max. Run by hand,
# not in CI; about 3 minutes on 2 cores.
#
#   hack/bench-metrics.sh                          # 300/s for 60 s
#   hack/bench-metrics.sh --rate 600 --duration 30s
#
# Figures go to stdout ("name: value unit"), progress to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash hack/testbin.sh control-plane >/dev/null
bash hack/testbin.sh nats 2.15.2 >/dev/null
bash hack/testbin.sh nats 2.15.1 >/dev/null
bash hack/testbin.sh exporter >/dev/null
go build -o "${TMPDIR:-/tmp}/nats-operator-bench-metrics" ./test/bench/metricsload
exec "${TMPDIR:-/tmp}/nats-operator-bench-metrics" "$@"
