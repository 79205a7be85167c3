#!/usr/bin/env bash
# test.sh is `make test`: it builds (or reuses) the test-bed binaries, checks
# that generated code is fresh and go vet is clean, then runs every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export GOWORK=off

echo "== test-bed binaries"
bash hack/testbin.sh control-plane
bash hack/testbin.sh nats 2.15.2
bash hack/testbin.sh nats 2.15.1
bash hack/testbin.sh exporter
# test/certmanager runs cert-manager's controllers (about 8 minutes cold).
bash hack/testbin.sh cert-manager

echo "== generated code is up to date"
bash hack/verify-codegen.sh
echo "== verify-codegen.sh catches a type changed without regenerating"
bash hack/verify-codegen-test.sh

echo "== go vet"
go vet ./...
(cd hack/cert-manager-controller && go vet .)

echo "== go test"
# -json through hack/testreport: it prints what plain go test prints (each
# package's ok/FAIL line, failed tests' output in full), keeps the JSON,
# and ends with the 10 slowest tests and every package's time. -parallel 4:
# test/e2e runs its scenarios in parallel on one control plane (most of a
# scenario is waiting on nats-server and the controller; measured on 2
# cores: e2e 623 s at 4).
report_dir="$(mktemp -d "${TMPDIR:-/tmp}/nats-operator-test.XXXXXX")"
go build -o "$report_dir/testreport" ./hack/testreport
set +e
go test ./... -json -count=1 -timeout 60m -parallel "${GOTEST_PARALLEL:-4}" ${GOTEST_FLAGS:-} |
  "$report_dir/testreport" -json "$report_dir/test.json"
rc=$?
set -e
exit $rc
