#!/usr/bin/env bash
# node-packages.sh installs the Debian packages the real node
# (hack/realnode.sh) runs: runc, the CNI plugins, iptables, nftables,
# ipset, conntrack and iproute2. It does nothing when they are all there,
# so a warm machine pays a dpkg query, not apt.
set -euo pipefail
packages=(runc containernetworking-plugins iptables nftables ipset conntrack iproute2 util-linux)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  exit 0
fi
echo "node-packages: installing ${missing[*]}" >&2
if [[ $(id -u) != 0 ]]; then
  echo "node-packages: the real node needs root (apt-get, network namespaces, mounts, cgroups)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Retried: a mirror's first answer is sometimes a stale index.
for attempt in 1 2 3; do
  if apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    exit 0
  fi
  echo "node-packages: apt-get failed (attempt $attempt); retrying" >&2
  sleep 5
done
exit 1
