#!/usr/bin/env bash
# update-codegen.sh regenerates everything derived from pkg/apis:
#   - deepcopy functions (zz_generated.deepcopy.go) and registration helpers,
#   - the typed clientset (with watch and apply configurations), listers and
#     informers under pkg/generated,
#   - the CRD manifests under manifests/crds (controller-gen).
# Generated code is never edited by hand; hack/verify-codegen.sh checks it is
# up to date. Both generators are pinned as tools in go.mod.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
MODULE="github.com/nats-operator/nats-operator"
export GOWORK=off

# The generator scripts come from the module proxy at the version go.mod
# pins: `go list -m` prints nothing for a module not yet in the module cache
# (a fresh machine), so download it first.
go mod download k8s.io/code-generator
CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
if [ ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]; then
  echo "update-codegen: k8s.io/code-generator has no kube_codegen.sh (module dir: '${CODEGEN_PKG}')" >&2
  exit 1
fi
# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

kube::codegen::gen_helpers \
  --boilerplate "${ROOT}/hack/boilerplate.go.txt" \
  "${ROOT}/pkg/apis"

kube::codegen::gen_register \
  --boilerplate "${ROOT}/hack/boilerplate.go.txt" \
  "${ROOT}/pkg/apis"

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --output-dir "${ROOT}/pkg/generated" \
  --output-pkg "${MODULE}/pkg/generated" \
  --boilerplate "${ROOT}/hack/boilerplate.go.txt" \
  "${ROOT}/pkg/apis"

rm -rf "${ROOT}/manifests/crds"
go tool controller-gen crd:crdVersions=v1 \
  paths="./pkg/apis/..." \
  output:crd:artifacts:config=manifests/crds
