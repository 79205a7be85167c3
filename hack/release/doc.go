// Command release makes a release in a directory (`make release
// VERSION=x.y.z` runs it through hack/release.sh, into dist/): the image
// archive, install.yaml and install-namespaced.yaml pinned to the image's
// digest, the kubectl-nats binaries (-plugins=false leaves them out) and
// SHA256SUMS. See internal/release.
package main
