// Command nodeimage writes an OCI image archive holding one static binary,
// for the real node's container runtime to import (ctr -n k8s.io images
// import FILE): the images of the pods the test bed runs, without a
// registry or a container daemon. The nats-server image, from the static
// nats-server of `hack/testbin.sh nats-static`:
//
//	go run ./hack/nodeimage -binary "$(hack/testbin.sh nats-static)/nats-server" \
//	    -path /nats-server -tag docker.io/library/nats:2.15.2 -out _output/nats.tar
//
// The image is one layer on nothing (FROM scratch): the binary at -path
// (0755, with the directories above it) and internal/image's /etc/passwd
// and /etc/group (root, nobody and nonroot 65532). Its config runs
// -entrypoint (-path when empty) as -user (the runtime's default, root,
// when empty) on linux/-arch. Every time in it is the Unix epoch and every
// owner root, so the same binary and flags give the same digest.
//
// -tag is the image's whole reference, registry, repository and tag, as
// the kubelet asks the runtime for it (docker.io/library/nats:2.15.2 for
// nats:2.15.2): index.json names the image by it (the annotation
// io.containerd.image.name, which containerd's import takes as the
// image's name) and by its tag (org.opencontainers.image.ref.name).
package main
