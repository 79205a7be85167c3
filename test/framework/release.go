package framework

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-operator/nats-operator/internal/image"
	"github.com/nats-operator/nats-operator/internal/release"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// TestReleaseVersion is the version of the releases tests make.
const TestReleaseVersion = "0.0.0-e2e"

// Release is a release a test made with BuildRelease.
type Release struct {
	*release.Result
	// Dir holds its files.
	Dir string
}

// Path is the path of one of the release's files (release.InstallFile).
func (r *Release) Path(name string) string { return filepath.Join(r.Dir, name) }

// ImageArchive is the release's image archive.
func (r *Release) ImageArchive() string { return r.Path(release.ImageFile(r.Version)) }

// BuildRelease makes the release TestReleaseVersion of this checkout as
// make release does (internal/release: the controller built static with
// the version set, its image, install.yaml and install-namespaced.yaml
// pinned to the image's digest, SHA256SUMS) without the kubectl-nats
// binaries, in a directory kept when the test fails. It checks that the
// digest the manifests name is the one the image archive holds.
func BuildRelease(ctx context.Context, t testing.TB) *Release {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := KeptDir(t, "release")
	begin := time.Now()
	res, err := release.Run(ctx, release.Options{Version: TestReleaseVersion, Root: root, Out: dir})
	if err != nil {
		t.Fatalf("making the release: %v", err)
	}
	r := &Release{Result: res, Dir: dir}
	held, err := image.ArchiveDigest(r.ImageArchive())
	if err != nil {
		t.Fatal(err)
	}
	if held != res.Digest || res.Reference != image.Repository+":v"+TestReleaseVersion+"@"+held.String() {
		t.Fatalf("the release names %s, its image archive holds %s", res.Reference, held)
	}
	t.Logf("release %s made in %s (without kubectl-nats) in %s: %s", res.Version, dir, time.Since(begin).Round(time.Millisecond), res.Reference)
	return r
}
