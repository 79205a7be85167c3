#!/usr/bin/env bash
# testbin.sh builds the binaries of the local test bed from the Go module proxy
# (the exporter from its source vendored in third_party, with its dependencies
# from the proxy) into a cache outside the repository, keyed by versions and
# the Go version, and prints the directory that holds them. A marker file is written last, so
# a half-finished build is never trusted; a warm cache is reused as it is.
#
#   hack/testbin.sh control-plane   -> dir with etcd, kube-apiserver, kube-controller-manager, kubectl,
#                                      and the real node's kubelet, kube-proxy and
#                                      kube-scheduler (hack/realnode.sh): one go
#                                      build, so their packages compile once
#   hack/testbin.sh node            -> dir with the real node's binaries but the
#                                      kubelet (in control-plane): containerd,
#                                      containerd-shim-runc-v2, ctr, pause,
#                                      coredns (hack/coredns), kube-router
#   hack/testbin.sh nats [VERSION]  -> dir with nats-server (default v2.15.2)
#   hack/testbin.sh nats-static [VERSION]
#                                   -> dir with nats-server built with
#                                      CGO_ENABLED=0, for container images
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
# CONTAINERD_VERSION (v2.4.2), COREDNS_VERSION (v1.15.0),
# KUBE_ROUTER_VERSION (v2.1.0), NATS_OPERATOR_CACHE (cache root).
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
NATS_SERVER_VERSION="${NATS_SERVER_VERSION:-v2.15.2}"
CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-v1.21.2}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"
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

# quiet CMD... runs CMD, showing its output (go get's downloads) only when
# it fails.
quiet() {
  local out
  if ! out="$("$@" 2>&1)"; then
    printf '%s\n' "$out" >&2
    return 1
  fi
}

# says TEXT CMD... succeeds when CMD succeeds and its output (stdout and
# stderr, between two newlines) has TEXT.
says() {
  local want="$1" out; shift
  if out="$("$@" 2>&1)" && [[ $'\n'"$out"$'\n' == *"$want"* ]]; then
    return
  fi
  log "$* does not say ${want}: $out"
  return 1
}

# scratch_module DIR MODULE VERSION makes DIR a module that requires
# MODULE@VERSION, for building that module's commands with the versions its
# go.mod picks.
scratch_module() {
  mkdir -p "$1"
  (cd "$1" && quiet "$GO" mod init "testbin/${1##*/}" && quiet "$GO" get "$2@$3")
}

# staging version: v1.37.2 -> v0.37.2
staging_version() { echo "v0.${1#v1.}"; }

build_control_plane() {
  local dir="$CACHE_ROOT/control-plane-node-${KUBE_VERSION}-etcd-${ETCD_VERSION}-${GOVERSION}"
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
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
GO
    "$GO" mod tidy -e >/dev/null 2>&1 || true
    "$GO" get "k8s.io/kubernetes/cmd/kube-apiserver@${KUBE_VERSION}" >/dev/null 2>&1 || true
    local minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
    local ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld="$ld -X $p.gitVersion=${KUBE_VERSION} -X $p.gitMajor=1 -X $p.gitMinor=${minor} -X $p.gitTreeState=clean"
    done
    # One go build for all: their links run side by side. The kubelet,
    # kube-scheduler and kube-proxy are the real node's (hack/realnode.sh).
    "$GO" build -trimpath -ldflags "$ld" -o "$dir.tmp/" k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl \
      k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler
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

# build_nats_static: nats-server as build_nats builds it, with
# CGO_ENABLED=0, so it is linked statically and runs in an image FROM
# scratch (hack/nodeimage).
build_nats_static() {
  local v="${1:-$NATS_SERVER_VERSION}"
  case "$v" in v*) ;; *) v="v$v" ;; esac
  local dir="$CACHE_ROOT/nats-server-static-${v}-${GOVERSION}"
  built "$dir" && return
  claim "$dir"
  built "$dir" && return
  log "building nats-server ${v} (CGO_ENABLED=0) into $dir"
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  GOBIN="$dir.tmp" CGO_ENABLED=0 "$GO" install -trimpath -ldflags "-s -w" "github.com/nats-io/nats-server/v2@${v}"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  touch "$dir/.complete"
  echo "$dir"
}

# node: the binaries of a real node but the kubelet, kube-proxy and
# kube-scheduler (control-plane builds those with the other kubernetes
# commands). Each is built as its upstream release is, statically
# (CGO_ENABLED=0, which also leaves out containerd's btrfs snapshotter, the
# one piece that needs cgo):
#   containerd, ctr, containerd-shim-runc-v2  containerd's cmd/... with its
#       Makefile's build tags, its version set;
#   pause    build/pause/linux/pause.c of the kubernetes module zip, as
#            build/pause/Makefile compiles it (gcc -static);
#   coredns  hack/coredns (CoreDNS with only the cluster DNS's plugins);
#   kube-router  cmd/kube-router, its version set.
# The Go builds run side by side, each in its own scratch module, so one's
# downloads and links overlap another's compiles. The key has a hash of
# hack/coredns/main.go, so an edited main is never taken for the cached
# build.
build_node() {
  local coredns_main="$REPO_ROOT/hack/coredns/main.go"
  local key; key="$(sha256sum <"$coredns_main" | cut -c1-12)"
  local dir="$CACHE_ROOT/node-containerd-${CONTAINERD_VERSION}-coredns-${COREDNS_VERSION}-${key}-kube-router-${KUBE_ROUTER_VERSION}-pause-${KUBE_VERSION}-${GOVERSION}"
  built "$dir" && return
  claim "$dir"
  built "$dir" && return
  log "building containerd ${CONTAINERD_VERSION}, pause (kubernetes ${KUBE_VERSION}), coredns ${COREDNS_VERSION} and kube-router ${KUBE_ROUTER_VERSION} into $dir (with a cold Go build cache: about 11 minutes on 2 busy cores)"
  local begin=$SECONDS
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  (
    local t=$SECONDS pkg=github.com/containerd/containerd/v2
    scratch_module "$work/containerd" "$pkg" "$CONTAINERD_VERSION"
    cd "$work/containerd"
    local ld="-s -w -X $pkg/version.Version=${CONTAINERD_VERSION} -X $pkg/version.Package=$pkg"
    # The Makefile's tags: urfave_cli_no_docs for all, no_grpc for the shim.
    CGO_ENABLED=0 "$GO" build -trimpath -tags urfave_cli_no_docs -ldflags "$ld" -o "$dir.tmp/" \
      "$pkg/cmd/containerd" "$pkg/cmd/ctr"
    CGO_ENABLED=0 "$GO" build -trimpath -tags "urfave_cli_no_docs no_grpc" -ldflags "$ld" -o "$dir.tmp/" \
      "$pkg/cmd/containerd-shim-runc-v2"
    log "built containerd ${CONTAINERD_VERSION} in $((SECONDS - t)) s"
  ) &
  local containerd_pid=$!
  (
    local t=$SECONDS
    scratch_module "$work/coredns" github.com/coredns/coredns "$COREDNS_VERSION"
    cd "$work/coredns"
    cp "$coredns_main" main.go
    # As a file: its build constraint (ignore) keeps it out of the main
    # module, and a file named on the command line is built regardless.
    CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$dir.tmp/coredns" main.go
    log "built coredns ${COREDNS_VERSION} in $((SECONDS - t)) s"
  ) &
  local coredns_pid=$!
  (
    local t=$SECONDS pkg=github.com/cloudnativelabs/kube-router/v2
    scratch_module "$work/kube-router" "$pkg" "$KUBE_ROUTER_VERSION"
    cd "$work/kube-router"
    # BuildDate: the tag's, as the module proxy dates the version.
    local date
    date="$("$GO" list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$pkg@${KUBE_ROUTER_VERSION}")"
    CGO_ENABLED=0 "$GO" build -trimpath \
      -ldflags "-s -w -X $pkg/pkg/version.Version=${KUBE_ROUTER_VERSION} -X $pkg/pkg/version.BuildDate=${date}" \
      -o "$dir.tmp/kube-router" "$pkg/cmd/kube-router"
    log "built kube-router ${KUBE_ROUTER_VERSION} in $((SECONDS - t)) s"
  ) &
  local kube_router_pid=$!
  # pause: a second of gcc, beside the Go builds. Its version is the
  # Makefile's: v<TAG>-<the kubernetes tag>.
  (
    local t=$SECONDS src
    src="$(cd "$work" && "$GO" mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')/build/pause"
    local tag; tag="$(sed -n 's/^TAG ?= *//p' "$src/Makefile")"
    gcc -Os -Wall -Werror -static -s -DVERSION="v${tag}-${KUBE_VERSION}" -o "$dir.tmp/pause" "$src/linux/pause.c"
    log "built pause v${tag} in $((SECONDS - t)) s"
  ) &
  local pause_pid=$!
  local failed=()
  wait "$pause_pid" || failed+=("pause")
  wait "$containerd_pid" || failed+=("containerd ${CONTAINERD_VERSION}")
  wait "$coredns_pid" || failed+=("coredns ${COREDNS_VERSION}")
  wait "$kube_router_pid" || failed+=("kube-router ${KUBE_ROUTER_VERSION}")
  # Each runs, and says the version it was built as; coredns has the
  # kubernetes plugin.
  if (( ${#failed[@]} == 0 )); then
    says " ${CONTAINERD_VERSION} " "$dir.tmp/containerd" --version &&
      says " ${CONTAINERD_VERSION}" "$dir.tmp/ctr" --version &&
      says "${CONTAINERD_VERSION}" "$dir.tmp/containerd-shim-runc-v2" -v &&
      says "-${KUBE_VERSION}" "$dir.tmp/pause" -v &&
      says "CoreDNS-${COREDNS_VERSION#v}" "$dir.tmp/coredns" -version &&
      says $'\nkubernetes\n' "$dir.tmp/coredns" -plugins &&
      says "version ${KUBE_ROUTER_VERSION}," "$dir.tmp/kube-router" --version ||
      failed+=("a check of what was built")
  fi
  if (( ${#failed[@]} > 0 )); then
    log "building the node's binaries failed: ${failed[*]}"
    rm -rf "$work"
    exit 1
  fi
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  touch "$dir/.complete"
  log "built the node's binaries in $((SECONDS - begin)) s"
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
  node) build_node ;;
  nats) build_nats "${2:-}" ;;
  nats-static) build_nats_static "${2:-}" ;;
  cert-manager) build_cert_manager ;;
  exporter) build_exporter ;;
  all) build_control_plane; build_nats; build_exporter ;;
  *) echo "usage: $0 [control-plane|node|nats [VERSION]|nats-static [VERSION]|cert-manager|exporter|all]" >&2; exit 2 ;;
esac
