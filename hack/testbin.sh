#!/usr/bin/env bash
# testbin.sh builds the binaries of the local test bed from the Go module proxy
# (the exporter from its source vendored in third_party, with its dependencies
# from the proxy) into a cache outside the repository, keyed by versions and
# the Go version, and prints the directory that holds them. A marker file is written last, so
# a half-finished build is never trusted; a warm cache is reused as it is.
#
#   hack/testbin.sh control-plane   -> dir with etcd, kube-apiserver, kube-controller-manager, kubectl
#   hack/testbin.sh nats [VERSION]  -> dir with nats-server (default v2.15.2)
#   hack/testbin.sh cert-manager    -> dir with cert-manager-controller and crds/*.yaml
#   hack/testbin.sh exporter        -> dir with prometheus-nats-exporter (0.20.1),
#                                      built from third_party/prometheus-nats-exporter
#   hack/testbin.sh all             -> control-plane, nats (the default nats
#                                      version) and exporter; not cert-manager,
#                                      which takes about 8 minutes cold on 2
#                                      busy cores
#
# Environment: KUBE_VERSION (v1.37.2), ETCD_VERSION (v3.6.16),
# NATS_SERVER_VERSION (v2.15.2), CERT_MANAGER_VERSION (v1.21.2),
# NATS_OPERATOR_CACHE (cache root).
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
NATS_SERVER_VERSION="${NATS_SERVER_VERSION:-v2.15.2}"
CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-v1.21.2}"
# The exporter is built from the source vendored in the repository, so its
# version is that of the source, not a choice.
EXPORTER_VERSION="0.20.1"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE_ROOT="${NATS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nats-operator}/testbin"
GO="${GO:-go}"
GOVERSION="$("$GO" env GOVERSION)"
export GOFLAGS="${GOFLAGS:-} -mod=mod"
export GOWORK=off

log() { echo "testbin: $*" >&2; }

# One build at a time per artifact: a caller that finds the marker of what
# it asks for uses it at once; else it takes that artifact's lock, then
# looks again (a second caller waits, then finds the marker and reuses what
# the first built). Builds of different artifacts run at the same time
# (hack/test.sh builds cert-manager beside the control plane).
mkdir -p "$CACHE_ROOT"
# built DIR prints DIR and succeeds when its build is complete.
built() { [ -f "$1/.complete" ] && echo "$1"; }
# claim DIR takes DIR's build lock (released when the script exits or
# claims another).
claim() {
  exec 9>"$1.lock"
  flock 9
}

# staging version: v1.37.2 -> v0.37.2
staging_version() { echo "v0.${1#v1.}"; }

build_control_plane() {
  local dir="$CACHE_ROOT/control-plane-${KUBE_VERSION}-etcd-${ETCD_VERSION}-${GOVERSION}"
  built "$dir" && return
  claim "$dir"
  built "$dir" && return
  log "building etcd ${ETCD_VERSION} and kubernetes ${KUBE_VERSION} into $dir (cold: several minutes)"
  local begin=$SECONDS
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  mkdir -p "$dir.tmp"
  # etcd: its go.mod has replace lines, so build from a scratch module. It
  # builds while kubernetes' modules download (the network beside the CPU).
  (
    mkdir -p "$work/etcd" && cd "$work/etcd"
    "$GO" mod init testbin/etcd >/dev/null 2>&1
    "$GO" get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >/dev/null 2>&1
    "$GO" build -trimpath -ldflags "-s -w" -o "$dir.tmp/etcd" go.etcd.io/etcd/server/v3
  ) &
  local etcd_pid=$!
  # kubernetes: replace every staging module with its published version.
  (
    mkdir -p "$work/kube" && cd "$work/kube"
    "$GO" mod init testbin/kube >/dev/null 2>&1
    local modfile
    modfile="$("$GO" mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    local sv; sv="$(staging_version "$KUBE_VERSION")"
    "$GO" mod edit -require "k8s.io/kubernetes@${KUBE_VERSION}"
    grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging' "$modfile" | awk '{print $1}' | while read -r m; do
      "$GO" mod edit -replace "$m=$m@$sv"
    done
    cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    "$GO" mod tidy -e >/dev/null 2>&1 || true
    "$GO" get "k8s.io/kubernetes/cmd/kube-apiserver@${KUBE_VERSION}" >/dev/null 2>&1 || true
    local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
    local ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="$ld -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor} -X $p.gitTreeState=clean"
    done
    # One go build for the three: their links run side by side.
    "$GO" build -trimpath -ldflags "$ld" -o "$dir.tmp/" k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
  )
  wait "$etcd_pid" || { log "building etcd ${ETCD_VERSION} failed"; exit 1; }
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  touch "$dir/.complete"
  log "built etcd and kubernetes in $((SECONDS - begin)) s"
  echo "$dir"
}

build_nats() {
  local v="${1:-$NATS_SERVER_VERSION}"
  case "$v" in v*) ;; *) v="v$v" ;; esac
  local dir="$CACHE_ROOT/nats-server-${v}-${GOVERSION}"
  built "$dir" && return
  claim "$dir"
  built "$dir" && return
  log "building nats-server ${v} into $dir"
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  GOBIN="$dir.tmp" "$GO" install -trimpath -ldflags "-s -w" "github.com/nats-io/nats-server/v2@${v}"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  touch "$dir/.complete"
  echo "$dir"
}

# cert-manager: upstream's main package, cmd/controller, is its own module
# (github.com/cert-manager/cert-manager/controller-binary, a path that does
# not match its directory), which the module proxy does not serve (404) and
# the main module's zip leaves out. So hack/cert-manager-controller, a small
# main of ours, runs cert-manager's own controllers (pkg/controller/...) from
# the main module, built in a scratch copy of that directory. The CRDs are
# the plain controller-gen output in deploy/crds of the module zip (their
# specs are the Helm chart's, without its labels).
build_cert_manager() {
  local src="$REPO_ROOT/hack/cert-manager-controller"
  local key; key="$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-12)"
  local dir="$CACHE_ROOT/cert-manager-${CERT_MANAGER_VERSION}-${key}-${GOVERSION}"
  built "$dir" && return
  claim "$dir"
  built "$dir" && return
  log "building cert-manager ${CERT_MANAGER_VERSION} controllers into $dir (with a cold Go build cache: about 8 minutes)"
  local begin=$SECONDS
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/crds"
  cp "$src/go.mod" "$src/go.sum" "$src/main.go" "$work/"
  (
    cd "$work"
    if ! grep -q "github.com/cert-manager/cert-manager ${CERT_MANAGER_VERSION}\$" go.mod; then
      "$GO" get "github.com/cert-manager/cert-manager@${CERT_MANAGER_VERSION}"
      "$GO" mod tidy
    fi
    # No -trimpath: built as `go vet` compiles, so hack/test.sh's vet of
    # hack/cert-manager-controller reuses these packages from the build
    # cache instead of compiling cert-manager a second time (minutes cold).
    "$GO" build \
      -ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=${CERT_MANAGER_VERSION}" \
      -o "$dir.tmp/cert-manager-controller" .
  )
  local moddir
  moddir="$("$GO" mod download -json "github.com/cert-manager/cert-manager@${CERT_MANAGER_VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  cp "$moddir"/deploy/crds/*.yaml "$dir.tmp/crds/"
  chmod u+w "$dir.tmp"/crds/*.yaml
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  touch "$dir/.complete"
  log "built cert-manager ${CERT_MANAGER_VERSION} in $((SECONDS - begin)) s"
  echo "$dir"
}

# prometheus-nats-exporter: the module proxy does not serve it (403), so it
# is built from its source at the tag, vendored as a nested module in
# third_party/prometheus-nats-exporter (see its README.md); its dependencies
# come from the proxy. Built as upstream's release is (CGO_ENABLED=0,
# -trimpath, main.version set). The key also has a hash of the source, so an
# edited copy is never taken for the cached build.
build_exporter() {
  local src="$REPO_ROOT/third_party/prometheus-nats-exporter"
  if ! grep -q "tag \`v${EXPORTER_VERSION}\`" "$src/README.md"; then
    echo "testbin: $src/README.md does not name tag v${EXPORTER_VERSION}: update EXPORTER_VERSION in $0" >&2
    exit 1
  fi
  local key
  key="$(cd "$src" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 | LC_ALL=C sort -z |
    xargs -0 sha256sum | sha256sum | cut -c1-12)"
  local dir="$CACHE_ROOT/prometheus-nats-exporter-${EXPORTER_VERSION}-${key}-${GOVERSION}"
  built "$dir" && return
  claim "$dir"
  built "$dir" && return
  log "building prometheus-nats-exporter ${EXPORTER_VERSION} from $src into $dir"
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  (
    cd "$src"
    CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w -X main.version=${EXPORTER_VERSION}" \
      -o "$dir.tmp/prometheus-nats-exporter" .
  )
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  touch "$dir/.complete"
  echo "$dir"
}

case "${1:-all}" in
  control-plane) build_control_plane ;;
  nats) build_nats "${2:-}" ;;
  cert-manager) build_cert_manager ;;
  exporter) build_exporter ;;
  all) build_control_plane; build_nats; build_exporter ;;
  *) echo "usage: $0 [control-plane|nats [VERSION]|cert-manager|exporter|all]" >&2; exit 2 ;;
esac
