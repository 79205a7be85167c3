#!/usr/bin/env bash
# release.sh is `make release VERSION=x.y.z`: it writes the release vx.y.z
# into dist/ (removed first): the controller's image as an OCI image
# archive, install.yaml and install-namespaced.yaml pinned to the image's
# digest, kubectl-nats for linux and darwin (amd64, arm64) and SHA256SUMS,
# then checks the sums. Built without a container daemon (hack/release,
# internal/release). Extra arguments go to hack/release (-plugins=false
# leaves the plugin binaries out; -arch sets the image's architecture).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export GOWORK=off

version="${1:-}"
if [[ -z "$version" ]]; then
  echo "release: no version given: run make release VERSION=x.y.z (the release is tagged vx.y.z)" >&2
  exit 2
fi
shift
go run ./hack/release -version "$version" -out dist -clean "$@"
(cd dist && sha256sum -c --quiet SHA256SUMS)
echo "dist/SHA256SUMS checks"
