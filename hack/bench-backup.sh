#!/usr/bin/env bash
# bench-backup.sh measures a backup and a restore of one 1 GiB stream as the
# Jobs of a NatsBackup and a NatsRestore run them (test/bench/backup): wall
# time, throughput and the peak memory of the nats-operator process that
# moves the data. Run by hand, not in CI; about a minute on 2 cores, and
# about 3 GiB of disk under $TMPDIR.
#
#   hack/bench-backup.sh                  # 1 GiB
#   hack/bench-backup.sh --size 104857600 # 100 MiB
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
nats_server="$(bash hack/testbin.sh nats 2.15.2 | tail -1)"
[[ -d "$nats_server" ]] && nats_server="$nats_server/nats-server"
bin="${TMPDIR:-/tmp}/nats-operator-bench-backup"
mkdir -p "$bin"
go build -o "$bin/nats-operator" ./cmd/nats-operator
go build -o "$bin/bench" ./test/bench/backup
exec "$bin/bench" -nats-server "$nats_server" -nats-operator "$bin/nats-operator" "$@"
