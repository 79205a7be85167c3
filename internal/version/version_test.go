package version

import (
	"strings"
	"testing"
)

func TestTheLinkerSetsVersionAndCommit(t *testing.T) {
	v, c := Version, Commit
	t.Cleanup(func() { Version, Commit = v, c })
	Version, Commit = "v0.2.0", "0123456789ab"
	got := Get().String()
	if !strings.HasPrefix(got, "v0.2.0 (commit 0123456789ab, go") {
		t.Fatalf("Get().String() = %q, want the version and the commit the linker set", got)
	}
}

func TestWithoutTheLinkerTheVersionIsDev(t *testing.T) {
	if Version != "dev" {
		t.Fatalf("Version = %q without -X, want dev", Version)
	}
	if Get().Commit == "" {
		t.Fatal("Commit is empty: want the build's vcs.revision or unknown")
	}
}
