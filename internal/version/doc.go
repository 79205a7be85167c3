// Package version is the version and commit of this build, printed by
// `nats-operator --version` and `kubectl nats version`.
//
// A release build sets Version with the linker
// (-X github.com/nats-operator/nats-operator/internal/version.Version=v0.2.0,
// see hack/release.sh); Commit comes from the build information Go records
// (vcs.revision, with "-dirty" for a modified tree), or the linker as well.
// A `go build` without either reports version "dev".
package version
