// Package image builds the controller's container image without a
// container daemon, and writes and reads it as an OCI image archive.
//
// The image is one layer on nothing (FROM scratch): the static binary at
// /nats-operator (0755) and /etc/passwd and /etc/group naming the nonroot
// user 65532 (rootfs/, the files the Dockerfile copies too). Its config
// runs the binary as 65532:65532 (Entrypoint ["/nats-operator"]) on
// linux/<arch>, labelled with the version and the commit. Every time in it
// is the Unix epoch and every owner root, so the same binary always gives
// the same digest.
//
// The binary needs nothing else from the image: it is linked statically,
// carries Mozilla's root certificates for when the system has none
// (golang.org/x/crypto/x509roots/fallback, imported by cmd/nats-operator),
// and writes only to its volumes (the Deployment's and the backup Jobs'
// root filesystems are read-only).
//
// WriteArchive writes an OCI image layout as a tar file (what skopeo and
// podman call oci-archive), with the manifest's digest, the image's
// digest, in index.json; a registry that receives the image unchanged
// serves the same digest. ArchiveDigest reads that digest back, Read the
// image, and Extract writes an image's files into a directory (the local
// test node runs pods from there: test/localnode).
//
// The Dockerfile describes the same image for builds with a daemon;
// TestDockerfileDescribesTheSameImage fails when its last stage differs
// from what Build puts in the image.
package image
