#!/usr/bin/env bash
# matrix-stamp.sh prints the content stamp of the nats-server matrix tests
# (pkg/rollout/matrix): a sha256 over everything what they prove depends on.
# hack/test.sh runs the whole matrix when no passing run of this stamp is on
# record, and one smoke case when there is one.
#
# What goes in:
#   - the Go version, go.mod and go.sum (the nats-server and nats.go the
#     tests link, the module versions of everything else);
#   - hack/testbin.sh (how the nats-server binaries of the matrix are built;
#     their versions are named in the matrix's own files, below);
#   - every file of pkg/rollout/matrix (the matrix, its cases, testdata);
#   - the source of every package of this module the matrix compiles
#     (go list -deps: pkg/rollout with the planner's change effects and
#     reload table, pkg/render and rendertest, pkg/apis, pkg/observe, pkg/act,
#     internal/...), test files left out.
# A change to any of these runs the whole matrix again; a change elsewhere
# (the controller, the e2e tests, the README) does not.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export GOWORK=off
module="$(go list -m)"
{
  go version
  ls go.mod go.sum hack/testbin.sh
  find pkg/rollout/matrix -type f
  go list -deps -f '{{if and .Module (eq .Module.Path "'"$module"'")}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .CgoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}' -test ./pkg/rollout/matrix |
    sed "s|^$PWD/||" | grep -v '//' # the generated test main (in the build cache)
} | sed '/^$/d' | {
  read -r goversion
  echo "$goversion"
  sort -u | while read -r f; do
    printf '%s %s\n' "$(sha256sum < "$f" | cut -d' ' -f1)" "$f"
  done
} | sha256sum | cut -d' ' -f1
