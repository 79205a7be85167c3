#!/usr/bin/env bash
# test.sh is `make test`: it builds (or reuses) the test-bed binaries, checks
# that generated code is fresh and go vet is clean, then runs every test (the
# nats-server matrix whole only when what it proves changed, see below).
# `hack/test.sh matrix` (make test-matrix) builds the nats-server binaries and
# runs the whole matrix alone.
#
# On a fresh machine most of the time is building (the control plane alone
# is about 15 minutes of CPU on 2 cores) and most of the tests' time is
# waiting on servers. The control plane is the critical path: go test
# waits for it. So the work runs as four lines, the checks that nothing
# waits for at the lowest CPU priority (nice 19), so they take only the
# CPU the critical path leaves idle (module downloads, links, then the
# tests' waits):
#   1. the control plane, then go test (every package but the matrix);
#   2. the matrix, beside go test (its servers at normal priority: it
#      measures nats-server, and starved servers would time out);
#   3. (nice) cert-manager's controllers, then go vet of their main; its
#      priority is raised when the control plane is built, and go test
#      starts once cert-manager is built (tests that use it have deadlines);
#   4. (nice) the generated-code check, go vet, then the checks of the
#      checking scripts themselves;
#   5. (nice) the real node's binaries, packages and test binary; once go
#      test has ended, hack/realnode.sh runs test/realnode on the real
#      node (alone: its kubelet, containerd and servers would otherwise
#      share the 2 CPUs with go test's).
# Lines 2-5 print their output when line 1 ends; any failure fails the run.
# Measured cold (empty module, build and test-bed caches) with the four
# lines at one priority: 63 minutes, the control plane starved to 46; see
# the README for the timings of this layout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export GOWORK=off
begin=$SECONDS
phase() { echo "== $* (at $((SECONDS - begin)) s)"; }

report_dir="$(mktemp -d "${TMPDIR:-/tmp}/nats-operator-test.XXXXXX")"

phase "test-bed binaries: nats-server 2.15.2 and 2.15.1, the exporter"
bash hack/testbin.sh nats 2.15.2
bash hack/testbin.sh nats 2.15.1
bash hack/testbin.sh exporter
go build -o "$report_dir/testreport" ./hack/testreport

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
if [[ "${1:-}" == matrix || "${MATRIX:-}" == all || ! -e "$matrix_dir/$stamp" ]]; then
  matrix_run='.'
  phase "matrix: stamp $stamp: running all of pkg/rollout/matrix"
else
  matrix_run="$matrix_smoke"
  phase "matrix: stamp $stamp passed on $(cat "$matrix_dir/$stamp"): running its smoke case (MATRIX=all or make test-matrix runs all)"
fi

# run_matrix runs pkg/rollout/matrix with -run $1 and records the stamp
# when it passed whole (not when GOTEST_FLAGS may have left some out).
run_matrix() {
  local start=$SECONDS
  go test ./pkg/rollout/matrix -json -count=1 -timeout 40m -run "$1" -parallel "${GOTEST_PARALLEL:-4}" ${GOTEST_FLAGS:-} |
    "$report_dir/testreport" -summary=false -json "$report_dir/matrix.json"
  local rc=$?
  if [[ $rc == 0 && "$1" == . && -z "${GOTEST_FLAGS:-}" ]]; then
    mkdir -p "$matrix_dir" && date -u +%Y-%m-%dT%H:%M:%SZ > "$matrix_dir/$stamp"
  fi
  echo "(pkg/rollout/matrix took $((SECONDS - start)) s)"
  return $rc
}

if [[ "${1:-}" == matrix ]]; then
  phase "go test ./pkg/rollout/matrix (all)"
  set +e
  run_matrix .
  rc=$?
  set -e
  "$report_dir/testreport" -summarize "$report_dir/matrix.json" || true
  exit $rc
fi

# Line 3: cert-manager, then vet of our main that runs its controllers (the
# build compiles cert-manager as vet does, so vet finds it in the cache).
set +e
nice -n 19 bash -c '
  set -e
  start=$SECONDS
  bash hack/testbin.sh cert-manager
  touch "'"$report_dir"'/certmanager.built"
  (cd hack/cert-manager-controller && go vet .)
  echo "(cert-manager build and vet took $((SECONDS - start)) s)"
' > "$report_dir/certmanager.out" 2>&1 &
certmanager_pid=$!

# Line 4: generated code, vet, and the checks of the checking scripts
# (those regenerate code in clean clones, one with an empty module cache).
nice -n 19 bash -c '
  set -e
  start=$SECONDS
  echo "== generated code is up to date"
  bash hack/verify-codegen.sh
  echo "(verify-codegen.sh took $((SECONDS - start)) s)"
  echo "== go vet"
  go vet ./...
  echo "(verify-codegen.sh and go vet took $((SECONDS - start)) s)"
  echo "== verify-codegen.sh catches a type changed without regenerating"
  bash hack/verify-codegen-test.sh
  echo "== matrix-stamp.sh changes with what the matrix proves, and only then"
  bash hack/matrix-stamp-test.sh
  echo "(the checks line took $((SECONDS - start)) s)"
' > "$report_dir/checks.out" 2>&1 &
checks_pid=$!
set -e

# Line 5: (nice) the real node's binaries (containerd, CoreDNS,
# kube-router, pause; the kubelet, kube-proxy and kube-scheduler come with
# the control plane), the static nats-server of its images and its Debian
# packages: nothing waits for them until go test ends. (Its test binary
# is built after go test: compiled beside it, at nice 19 still, it made a
# timing-sensitive e2e scenario miss its window on a warm run.)
nice -n 19 bash -c '
  set -e
  start=$SECONDS
  bash hack/node-packages.sh
  bash hack/testbin.sh node >/dev/null
  bash hack/testbin.sh nats-static 2.15.2 >/dev/null
  bash hack/testbin.sh nats-static 2.15.1 >/dev/null
  echo "(the real node'"'"'s build took $((SECONDS - start)) s)"
' > "$report_dir/realnode-build.out" 2>&1 &
realnode_build_pid=$!

# Line 1: the control plane, then go test.
phase "test-bed binaries: etcd, kube-apiserver, kube-controller-manager, kubectl"
bash hack/testbin.sh control-plane

# cert-manager is needed by tests whose deadlines would run out waiting for
# a build at nice 19 beside them (seen: 17 minutes and still building):
# at normal priority now, and finished before go test starts.
# (The processes of the line, and so what they start from now on.)
tree() { echo "$1"; local c; for c in $(pgrep -P "$1"); do tree "$c"; done; }
renice -n 0 -p $(tree "$certmanager_pid") >/dev/null 2>&1 || true
phase "test-bed binaries: waiting for cert-manager's build"
while [[ ! -e "$report_dir/certmanager.built" ]] && kill -0 "$certmanager_pid" 2>/dev/null; do sleep 2; done

# Line 2: the matrix, beside go test.
set +e
run_matrix "$matrix_run" > "$report_dir/matrix.out" 2>&1 &
matrix_pid=$!

set -e
# The e2e framework builds the controller (go build -trimpath) inside the
# tests, under their deadlines: built here first, a cold machine's compile
# (minutes on 2 busy cores) is out of them, and the tests' build is a cache
# hit. (A cold run with other work beside it once spent a 10-minute test
# deadline waiting for the shared stack's build.)
phase "building the controller the tests start"
go build -trimpath -o /dev/null ./cmd/nats-operator
phase "go test"
# -json through hack/testreport: it prints what plain go test prints (each
# package's ok/FAIL line, failed tests' output in full), keeps the JSON,
# and ends with the 10 slowest tests and every package's time. -parallel 4:
# test/e2e runs its scenarios in parallel on one control plane (most of a
# scenario is waiting on nats-server and the controller; measured on 2
# cores: e2e 623 s at 4).
set +e
go test $(go list ./... | grep -v -e '/pkg/rollout/matrix$' -e '/test/realnode$') -json -count=1 -timeout 60m \
  -parallel "${GOTEST_PARALLEL:-4}" ${GOTEST_FLAGS:-} |
  "$report_dir/testreport" -summary=false -json "$report_dir/test.json"
rc=$?
phase "go test ended"
failed=()
[[ $rc == 0 ]] || failed+=("go test")

# The real node, once go test has ended (its servers and the node's
# would share 2 CPUs): hack/realnode.sh starts it in namespaces of its
# own, runs test/realnode's binary in it and tears it all down.
phase "the real node: waiting for its build"
if wait $realnode_build_pid && go test -c -o "$report_dir/realnode.test" ./test/realnode >> "$report_dir/realnode-build.out" 2>&1; then
  cat "$report_dir/realnode-build.out"
  phase "the real node: hack/realnode.sh test/realnode"
  start=$SECONDS
  if (cd test/realnode && bash ../../hack/realnode.sh "$report_dir/realnode.test" -test.v -test.count=1 -test.timeout=50m) \
    > "$report_dir/realnode.out" 2>&1; then
    echo "(the real node took $((SECONDS - start)) s)" >> "$report_dir/realnode.out"
  else
    echo "(the real node took $((SECONDS - start)) s)" >> "$report_dir/realnode.out"
    failed+=("the real node (test/realnode)")
  fi
else
  failed+=("the real node's build")
  cp "$report_dir/realnode-build.out" "$report_dir/realnode.out"
fi
wait $checks_pid || failed+=("generated code, go vet or the checks of the checking scripts")
wait $certmanager_pid || failed+=("the cert-manager build or its go vet")
wait $matrix_pid || failed+=("pkg/rollout/matrix")
set -e
phase "generated code, go vet, the checking scripts"
cat "$report_dir/checks.out"
phase "cert-manager"
cat "$report_dir/certmanager.out"
phase "the real node (test/realnode)"
cat "$report_dir/realnode.out"
phase "pkg/rollout/matrix (run: $matrix_run)"
cat "$report_dir/matrix.out"
"$report_dir/testreport" -summarize "$report_dir/test.json" "$report_dir/matrix.json"
echo "(go test -json output: $report_dir/test.json $report_dir/matrix.json)"
if (( ${#failed[@]} > 0 )); then
  for f in "${failed[@]}"; do echo "FAIL: $f (its output above)"; done
  exit 1
fi
phase "all passed"
