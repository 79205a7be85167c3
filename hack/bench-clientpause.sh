#!/usr/bin/env bash
# bench-clientpause.sh measures what a synchronous JetStream publisher sees
# when the server it is connected to goes through the pods' lame duck
# sequence (test/bench/clientpause): 3 real nats-server processes on configs
# rendered by pkg/render (lame duck 30s, grace period 10s), an R3 stream, the
# preStop `nats-server --signal ldm=<pid_file>` to the stream leader's server,
# for several nats.go client settings and for natscli's
# `nats bench js pub sync`, then the same with a 1s grace period. No
# Kubernetes. Run by hand, not in CI; about 8 minutes on 2 cores.
#
#   hack/bench-clientpause.sh                          # the full run
#   hack/bench-clientpause.sh --tries 1 --nats ""      # a quick one, no natscli
#   hack/bench-clientpause.sh --variants defaults,ldm_reconnect --short-grace 0
#
# Figures go to stdout ("name: value unit"), progress to stderr. The run
# waits while /tmp/ci-running exists.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NATSCLI_VERSION="${NATSCLI_VERSION:-v0.5.0}"
nats_dir="$(bash hack/testbin.sh nats 2.15.2 | tail -1)"
# natscli from the Go module proxy, cached outside the repository.
gobin="${NATS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nats-operator}/natscli-${NATSCLI_VERSION}"
if [[ ! -x "$gobin/nats" ]]; then
  echo "bench-clientpause: installing natscli ${NATSCLI_VERSION} into $gobin" >&2
  GOBIN="$gobin" GOFLAGS=-buildvcs=false GOWORK=off go install "github.com/nats-io/natscli/nats@${NATSCLI_VERSION}"
fi
go build -o "${TMPDIR:-/tmp}/nats-operator-bench-clientpause" ./test/bench/clientpause
exec "${TMPDIR:-/tmp}/nats-operator-bench-clientpause" --nats-server "$nats_dir/nats-server" --nats "$gobin/nats" "$@"
