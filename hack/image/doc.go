// Command image builds the controller's image without a container daemon
// (`make image`): it builds ./cmd/nats-operator static for linux (or takes
// -binary), puts it in the image internal/image makes, writes the image as
// an OCI image archive (-out, default _output/nats-operator-image.tar) and
// prints its digest and its pinned reference.
//
//	go run ./hack/image -version v0.2.0
//	go run ./hack/image -inspect _output/nats-operator-image.tar
//
// -inspect prints an archive's digest, manifest and config, as `crane
// digest`, `crane manifest` and `crane config` print an image's.
package main
