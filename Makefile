# The two commands of the README: `make demo` and `make test`.
.PHONY: test test-matrix demo build codegen verify-codegen testbin image release

# The version of `make image` (dev when empty) and of `make release`
# (required): x.y.z, tagged vx.y.z.
VERSION ?=

build:
	go build -o bin/nats-operator ./cmd/nats-operator

# Everything CI checks: generated code is fresh, go vet is clean, all tests
# (unit, real kube-apiserver + etcd, real nats-server processes) pass.
test:
	bash hack/test.sh

# The whole nats-server matrix (pkg/rollout/matrix) alone, whatever its
# stamp; `make test` runs it whole only when what it proves changed.
test-matrix:
	bash hack/test.sh matrix

demo:
	bash hack/demo.sh

codegen:
	bash hack/update-codegen.sh

verify-codegen:
	bash hack/verify-codegen.sh

testbin:
	bash hack/testbin.sh all

# The controller's image without a container daemon: the binary built
# static (CGO_ENABLED=0 -trimpath, version and commit set) in
# _output/nats-operator, the image as an OCI image archive in
# _output/nats-operator-image.tar; prints the digest and the reference.
image:
	go run ./hack/image -version "$(or $(VERSION),dev)" -out _output/nats-operator-image.tar

# dist/: the image archive, install.yaml and install-namespaced.yaml pinned
# to its digest, kubectl-nats for linux and darwin, SHA256SUMS.
release:
	bash hack/release.sh "$(VERSION)"
