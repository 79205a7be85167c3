#!/usr/bin/env bash
# test.sh is `make test`: it builds (or reuses) the test-bed binaries, checks
# that generated code is fresh and go vet is clean, then runs every test (the
# nats-server matrix whole only when what it proves changed, see below).
# `hack/test.sh matrix` (make test-matrix) builds the test-bed binaries and
# runs the whole matrix alone.
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

report_dir="$(mktemp -d "${TMPDIR:-/tmp}/nats-operator-test.XXXXXX")"
if [[ "${1:-}" != matrix ]]; then
  echo "== generated code is up to date"
  bash hack/verify-codegen.sh

  # The checks of the checking scripts themselves regenerate code in clean
  # clones (one with an empty module cache): minutes of CPU that would add
  # to the wall time if run first. They run beside go test instead (the
  # e2e scenarios mostly wait), their output printed when go test ends.
  (
    set -e
    echo "== verify-codegen.sh catches a type changed without regenerating"
    bash hack/verify-codegen-test.sh
    echo "== matrix-stamp.sh changes with what the matrix proves, and only then"
    bash hack/matrix-stamp-test.sh
  ) > "$report_dir/scripts.out" 2>&1 &
  scripts_pid=$!

  echo "== go vet"
  go vet ./...
  (cd hack/cert-manager-controller && go vet .)
fi

# The nats-server matrix tests (pkg/rollout/matrix, about 9 minutes) prove
# what nats-server does against the planner's tables. What they prove can
# change only with the nats-server versions, the matrix itself, or the code
# and tables it proves: hack/matrix-stamp.sh hashes all of that. They run
# whole when no passing run of this stamp is on record in the test-bed cache
# (or with MATRIX=all), else one smoke case (a rolling patch upgrade on real
# servers) and the checks that need no server (every change kind has a case).
matrix_dir="${NATS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nats-operator}/matrix-passed"
stamp="$(bash hack/matrix-stamp.sh)"
matrix_smoke='^(TestRouteCompatibilityMatrix|TestRouteCompatibilityMatrixCases|TestConfigReloadMatrixCases)$/^changes$/^patch_version_up$'
if [[ "${MATRIX:-}" == all || ! -e "$matrix_dir/$stamp" ]]; then
  matrix_run='.'
  echo "== matrix: stamp $stamp has no passing run on record: running all of pkg/rollout/matrix"
else
  matrix_run="$matrix_smoke"
  echo "== matrix: stamp $stamp passed on $(cat "$matrix_dir/$stamp"): running its smoke case (MATRIX=all or make test-matrix runs all)"
fi

go build -o "$report_dir/testreport" ./hack/testreport

# run_matrix runs pkg/rollout/matrix with -run $1 and records the stamp
# when it passed whole (not when GOTEST_FLAGS may have left some out).
run_matrix() {
  go test ./pkg/rollout/matrix -json -count=1 -timeout 40m -run "$1" -parallel "${GOTEST_PARALLEL:-4}" ${GOTEST_FLAGS:-} |
    "$report_dir/testreport" -summary=false -json "$report_dir/matrix.json"
  local rc=$?
  if [[ $rc == 0 && "$1" == . && -z "${GOTEST_FLAGS:-}" ]]; then
    mkdir -p "$matrix_dir" && date -u +%Y-%m-%dT%H:%M:%SZ > "$matrix_dir/$stamp"
  fi
  return $rc
}

if [[ "${1:-}" == matrix ]]; then
  echo "== go test ./pkg/rollout/matrix (all)"
  set +e
  run_matrix .
  rc=$?
  set -e
  "$report_dir/testreport" -summarize "$report_dir/matrix.json" || true
  exit $rc
fi

echo "== go test"
# -json through hack/testreport: it prints what plain go test prints (each
# package's ok/FAIL line, failed tests' output in full), keeps the JSON,
# and ends with the 10 slowest tests and every package's time. -parallel 4:
# test/e2e runs its scenarios in parallel on one control plane (most of a
# scenario is waiting on nats-server and the controller; measured on 2
# cores: e2e 623 s at 4). The matrix runs beside the rest, its output
# printed when it ends.
set +e
run_matrix "$matrix_run" > "$report_dir/matrix.out" 2>&1 &
matrix_pid=$!
go test $(go list ./... | grep -v '/pkg/rollout/matrix$') -json -count=1 -timeout 60m \
  -parallel "${GOTEST_PARALLEL:-4}" ${GOTEST_FLAGS:-} |
  "$report_dir/testreport" -summary=false -json "$report_dir/test.json"
rc=$?
wait $matrix_pid
matrix_rc=$?
wait $scripts_pid
scripts_rc=$?
cat "$report_dir/scripts.out"
if [[ $scripts_rc != 0 ]]; then
  echo "FAIL: the checks of verify-codegen.sh and matrix-stamp.sh (above)"
fi
echo "== pkg/rollout/matrix (run: $matrix_run)"
cat "$report_dir/matrix.out"
"$report_dir/testreport" -summarize "$report_dir/test.json" "$report_dir/matrix.json"
echo "(go test -json output: $report_dir/test.json $report_dir/matrix.json)"
set -e
if [[ $rc != 0 || $matrix_rc != 0 || $scripts_rc != 0 ]]; then
  exit 1
fi
