#!/usr/bin/env bash
# bench-scale.sh runs the scale benchmark of issue 21 on the local stack (see
# test/bench/scale): one controller, 10,000 unrelated objects, 100
# NatsClusters of 1 server, version changes with 1, 4 and 16 workers. Run by
# hand, not in CI; the full run takes about 15-20 minutes on 2 cores.
#
#   hack/bench-scale.sh                              # the full run
#   hack/bench-scale.sh --clusters 10 --objects 1000 # a quick one
#
# Figures go to stdout ("name: value unit"), progress to stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash hack/testbin.sh control-plane >/dev/null
bash hack/testbin.sh nats 2.15.2 >/dev/null
bash hack/testbin.sh nats 2.15.1 >/dev/null
go build -o "${TMPDIR:-/tmp}/nats-operator-bench-scale" ./test/bench/scale
exec "${TMPDIR:-/tmp}/nats-operator-bench-scale" "$@"
