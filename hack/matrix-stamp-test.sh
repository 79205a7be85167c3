#!/usr/bin/env bash
# matrix-stamp-test.sh checks hack/matrix-stamp.sh on a copy of the working
# tree: the stamp is stable, it changes when what the matrix proves changes
# (the planner, the renderer, the matrix, go.sum, the test-bed build), and
# it stays when only something the matrix does not compile changes (the
# controller, the e2e tests, the README).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export GOWORK=off
work="$(mktemp -d "${TMPDIR:-/tmp}/matrix-stamp-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tar --exclude=./.git --exclude=./bin -cf - . | tar -C "$work" -xf -
cd "$work"
base="$(bash hack/matrix-stamp.sh)"
fail=0
check() { # check same|changes FILE: append a line to FILE and compare stamps
  local want="$1" file="$2"
  cp "$file" "$file.orig"
  case "$file" in
    go.sum) echo "example.com/matrix-stamp-test v1.0.0 h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" >> "$file" ;;
    *.sh) echo "# matrix-stamp-test" >> "$file" ;;
    *.md) echo "matrix-stamp-test" >> "$file" ;;
    *) echo "// matrix-stamp-test" >> "$file" ;;
  esac
  local got
  got="$(bash hack/matrix-stamp.sh)"
  mv "$file.orig" "$file"
  if [[ "$want" == same && "$got" != "$base" ]] || [[ "$want" == changes && "$got" == "$base" ]]; then
    echo "FAIL: a line added to $file: the stamp should stay $want ($base -> $got)"
    fail=1
  else
    echo "ok: a line added to $file: stamp $want"
  fi
}
[[ "$(bash hack/matrix-stamp.sh)" == "$base" ]] || { echo "FAIL: two stamps of the same tree differ"; exit 1; }
check changes pkg/rollout/changes.go
check changes pkg/render/config.go
check changes pkg/render/rendertest/cluster.go
check changes pkg/rollout/matrix/matrix_cases_test.go
check changes go.sum
check changes hack/testbin.sh
check same pkg/controller/sync.go
check same test/e2e/storage_test.go
check same pkg/rollout/changes_test.go
check same README.md
exit $fail
