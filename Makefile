# The two commands of the README: `make demo` and `make test`.
.PHONY: test test-matrix demo build codegen verify-codegen testbin

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
