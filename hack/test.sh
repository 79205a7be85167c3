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
go test ./... -count=1 -timeout 60m ${GOTEST_FLAGS:-}
