package localnode

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
)

// DefaultVersion is the nats-server version of an image without a version
// tag (nats, nats:latest).
const DefaultVersion = "2.15.2"

var semver = regexp.MustCompile(`^v?(\d+\.\d+\.\d+(-(rc|RC|beta|alpha|preview)[.0-9A-Za-z]*)?)`)

// imageVersion returns the nats-server version of an image reference:
// nats:2.15.1, docker.io/library/nats:2.15.1-alpine and
// nats:2.15.1@sha256:... all give 2.15.1.
func imageVersion(image string) (string, error) {
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	if tag == "" || tag == "latest" || strings.HasPrefix(tag, "alpine") || strings.HasPrefix(tag, "scratch") {
		return DefaultVersion, nil
	}
	m := semver.FindStringSubmatch(tag)
	if m == nil {
		return "", fmt.Errorf("image %q: tag %q carries no nats-server version", image, tag)
	}
	return m[1], nil
}

// isNATSImage reports whether an image runs nats-server.
func isNATSImage(image string) bool {
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	base := ref[strings.LastIndex(ref, "/")+1:]
	return base == "nats" || base == "nats-server"
}

// binaries caches the binary of each version and its digest.
type binaries struct {
	find func(version string) (string, error)

	mu      sync.Mutex
	build   sync.Mutex
	paths   map[string]string
	digests map[string]string
}

func (b *binaries) get(version string) (path, digest string, err error) {
	b.mu.Lock()
	p, ok := b.paths[version]
	d := b.digests[version]
	b.mu.Unlock()
	if ok {
		return p, d, nil
	}
	// One build at a time: the build script shares a temporary directory
	// per version.
	b.build.Lock()
	defer b.build.Unlock()
	b.mu.Lock()
	p, ok = b.paths[version]
	d = b.digests[version]
	b.mu.Unlock()
	if ok {
		return p, d, nil
	}
	p, err = b.find(version)
	if err != nil {
		return "", "", err
	}
	f, err := os.Open(p)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", "", err
	}
	d = "sha256:" + hex.EncodeToString(h.Sum(nil))
	b.mu.Lock()
	b.paths[version], b.digests[version] = p, d
	b.mu.Unlock()
	return p, d, nil
}

// TestbinBinary returns the nats-server binary of version, built and cached
// by hack/testbin.sh of the repository that holds this package.
func TestbinBinary(version string) (string, error) {
	script, err := testbinScript()
	if err != nil {
		return "", err
	}
	unlock, err := lockTestbinCache()
	if err != nil {
		return "", err
	}
	defer unlock()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(script, "nats", version)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s nats %s: %w: %s", script, version, err, tail(stderr.String(), 2000))
	}
	dir := strings.TrimSpace(lastLine(stdout.String()))
	p := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s nats %s printed %q: %w", script, version, dir, err)
	}
	return p, nil
}

// testbinScript finds hack/testbin.sh: from $NATS_OPERATOR_ROOT, from the
// working directory upwards, or from this source file upwards.
func testbinScript() (string, error) {
	var starts []string
	if r := os.Getenv("NATS_OPERATOR_ROOT"); r != "" {
		starts = append(starts, r)
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, d := range starts {
		for {
			p := filepath.Join(d, "hack", "testbin.sh")
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	return "", fmt.Errorf("hack/testbin.sh not found (set NATS_OPERATOR_ROOT)")
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// lockTestbinCache takes the lock that test/testenv takes around
// hack/testbin.sh, so two test binaries never build into the same
// directory at once.
func lockTestbinCache() (func(), error) {
	root := os.Getenv("NATS_OPERATOR_CACHE")
	if root == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, err
			}
			cache = filepath.Join(home, ".cache")
		}
		root = filepath.Join(cache, "nats-operator")
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(root, "testbin.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
