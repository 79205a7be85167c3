// Package release makes a release of nats-operator in a directory (dist/
// for `make release VERSION=x.y.z`, which runs hack/release.sh, which runs
// hack/release):
//
//   - nats-operator-image-vX.Y.Z.tar: the controller's image (internal/image)
//     around the binary built static with the version and commit set
//     (internal/version), as an OCI image archive;
//   - install.yaml and install-namespaced.yaml: manifests/ and
//     manifests/namespaced/ rendered as `kubectl kustomize` renders them
//     (the kustomize library kubectl uses), the controller's image and its
//     --job-image (the image of backup and restore Jobs) pinned to
//     ghcr.io/nats-operator/nats-operator:vX.Y.Z@sha256:<the image's digest>;
//   - kubectl-nats-{linux,darwin}-{amd64,arm64}: the kubectl plugin,
//     built static with the version set (left out with Plugins false);
//   - SHA256SUMS of all of them, as sha256sum writes it (check with
//     `cd dist && sha256sum -c SHA256SUMS`).
//
// Every binary is built with CGO_ENABLED=0, -trimpath and
// -ldflags "-s -w -X .../internal/version.Version=vX.Y.Z -X ...Commit=<git HEAD>"
// (LDFlags), the flags of the Dockerfile's build stage. The image is for
// one architecture, the release tool's own unless told (Options.Arch).
package release
