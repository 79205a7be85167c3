package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release version (v0.2.0), set by the linker; "dev" otherwise.
var Version = "dev"

// Commit is the git commit of the build, set by the linker or read from
// the build information; "unknown" when neither has it.
var Commit = ""

// Info is what a build reports about itself.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns this build's Info.
func Get() Info {
	return Info{Version: Version, Commit: commit(), GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
}

// String is the one line `--version` prints:
// "v0.2.0 (commit 1a2b3c4d5e6f, go1.26.8 linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s %s)", i.Version, i.Commit, i.GoVersion, i.Platform)
}

func commit() string {
	if Commit != "" {
		return Commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
