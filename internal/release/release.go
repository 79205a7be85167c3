package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nats-operator/nats-operator/internal/image"
)

// versionPackage is the package whose Version and Commit the linker sets.
const versionPackage = "github.com/nats-operator/nats-operator/internal/version"

// PluginPlatforms are the platforms kubectl-nats is built for.
var PluginPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// The files of a release besides the plugin binaries.
const (
	InstallFile           = "install.yaml"
	InstallNamespacedFile = "install-namespaced.yaml"
	SumsFile              = "SHA256SUMS"
)

// ImageFile is the name of the image archive of a version.
func ImageFile(version string) string { return "nats-operator-image-" + version + ".tar" }

// PluginFile is the name of kubectl-nats built for platform (linux/amd64).
func PluginFile(platform string) string {
	return "kubectl-nats-" + strings.ReplaceAll(platform, "/", "-")
}

var versionRE = regexp.MustCompile(`^v?(\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?)$`)

// NormalizeVersion returns a release version as its tag: 0.2.0 and v0.2.0
// give v0.2.0; a pre-release (0.2.0-rc.1) is kept; anything else is an
// error.
func NormalizeVersion(v string) (string, error) {
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return "", fmt.Errorf("version %q: want x.y.z (or vx.y.z, or x.y.z-pre.1)", v)
	}
	return "v" + m[1], nil
}

// LDFlags are the linker flags of a release binary: no symbol table nor
// debug information, version and commit set.
func LDFlags(version, commit string) string {
	return fmt.Sprintf("-s -w -X %s.Version=%s -X %s.Commit=%s", versionPackage, version, versionPackage, commit)
}

// Build builds the package pkg (./cmd/nats-operator) of the module at root
// into out, static, for goos/goarch, with LDFlags.
func Build(ctx context.Context, root, pkg, out, goos, goarch, version, commit string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", LDFlags(version, commit), "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("GOOS=%s GOARCH=%s go build %s: %v\n%s", goos, goarch, pkg, err, b)
	}
	return nil
}

// GitCommit is the commit checked out at root, with "-dirty" when the
// tree has changes (untracked files too, as go build's vcs.modified);
// "unknown" without git.
func GitCommit(ctx context.Context, root string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		commit += "-dirty"
	}
	return commit
}

// Options are what Run needs.
type Options struct {
	// Version is x.y.z or vx.y.z; required.
	Version string
	// Root is the repository's root; "." when empty.
	Root string
	// Out is the directory the release is written to, created if need
	// be; files of the same names are replaced, others left alone.
	Out string
	// Commit is the commit the binaries and the image name; GitCommit
	// when empty.
	Commit string
	// Arch is the image's architecture; runtime.GOARCH when empty.
	Arch string
	// Plugins builds kubectl-nats for PluginPlatforms.
	Plugins bool
	// ControllerBinary, when set, is put in the image instead of a
	// binary built here (tests that care only about the manifests).
	ControllerBinary string
	// Log receives a line per step; none when nil.
	Log io.Writer
}

// Result is what Run made.
type Result struct {
	// Version is the tag: v0.2.0.
	Version string
	Commit  string
	// Digest is the image's digest, Reference the pinned reference the
	// manifests name.
	Digest    v1.Hash
	Reference string
	// Files are the names of the files written in Out, SHA256SUMS last.
	Files []string
}

// Run makes the release in o.Out.
func Run(ctx context.Context, o Options) (*Result, error) {
	version, err := NormalizeVersion(o.Version)
	if err != nil {
		return nil, err
	}
	if o.Root == "" {
		o.Root = "."
	}
	if o.Out == "" {
		return nil, fmt.Errorf("no output directory")
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	commit := o.Commit
	if commit == "" {
		commit = GitCommit(ctx, o.Root)
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	r := &Result{Version: version, Commit: commit}

	bin := o.ControllerBinary
	if bin == "" {
		tmp, err := os.MkdirTemp("", "nats-operator-release-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		bin = filepath.Join(tmp, "nats-operator")
		logf("building ./cmd/nats-operator for linux/%s, %s (commit %s)", o.Arch, version, commit)
		if err := Build(ctx, o.Root, "./cmd/nats-operator", bin, "linux", o.Arch, version, commit); err != nil {
			return nil, err
		}
	}
	img, err := image.Build(image.Options{Binary: bin, Version: version, Revision: commit, Arch: o.Arch})
	if err != nil {
		return nil, err
	}
	if r.Digest, err = image.WriteArchive(filepath.Join(o.Out, ImageFile(version)), img, version); err != nil {
		return nil, err
	}
	r.Reference = image.Reference(version, r.Digest)
	r.Files = append(r.Files, ImageFile(version))
	logf("image %s (linux/%s) in %s", r.Reference, o.Arch, ImageFile(version))

	for _, m := range []struct{ file, dir, what string }{
		{InstallFile, "manifests", "the CRDs, the RBAC (a ClusterRole: every namespace), the namespace nats-system and the controller"},
		{InstallNamespacedFile, filepath.Join("manifests", "namespaced"), "the CRDs, and the controller of the namespace nats only, with Roles (README: A controller for some namespaces only)"},
	} {
		y, err := Render(filepath.Join(o.Root, m.dir), r.Reference)
		if err != nil {
			return nil, err
		}
		header := fmt.Sprintf("# nats-operator %s (commit %s): %s.\n# Rendered from %s/; the controller's image: %s\n# kubectl apply -f %s\n",
			version, commit, m.what, filepath.ToSlash(m.dir), r.Reference, m.file)
		if err := os.WriteFile(filepath.Join(o.Out, m.file), append([]byte(header), y...), 0o644); err != nil {
			return nil, err
		}
		r.Files = append(r.Files, m.file)
		logf("%s from %s/", m.file, filepath.ToSlash(m.dir))
	}

	if o.Plugins {
		for _, p := range PluginPlatforms {
			goos, goarch, _ := strings.Cut(p, "/")
			logf("building ./cmd/kubectl-nats for %s", p)
			if err := Build(ctx, o.Root, "./cmd/kubectl-nats", filepath.Join(o.Out, PluginFile(p)), goos, goarch, version, commit); err != nil {
				return nil, err
			}
			r.Files = append(r.Files, PluginFile(p))
		}
	}

	if err := WriteSums(o.Out, r.Files); err != nil {
		return nil, err
	}
	r.Files = append(r.Files, SumsFile)
	logf("%s of %d files", SumsFile, len(r.Files)-1)
	return r, nil
}

// WriteSums writes dir/SHA256SUMS for the files named, in sha256sum's
// format ("<hex>  <name>"), sorted by name.
func WriteSums(dir string, files []string) error {
	names := append([]string(nil), files...)
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), n)
	}
	return os.WriteFile(filepath.Join(dir, SumsFile), []byte(b.String()), 0o644)
}
