package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// BinDirEnv, when set, names a directory holding etcd, kube-apiserver,
// kube-controller-manager and kubectl; hack/testbin.sh is then not run.
const BinDirEnv = "NATS_OPERATOR_TESTBIN_DIR"

// RepoRoot returns the repository root: the nearest directory above the
// working directory (a test's package directory) that holds go.mod.
func RepoRoot() (string, error) {
	starts := []string{}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("no go.mod found above the working directory")
}

var (
	binMu    sync.Mutex
	binCache = map[string]string{}
)

// testbin runs hack/testbin.sh with args from the repository root and returns
// the directory it prints. Calls are serialised within the process; across
// test binaries the script itself takes a lock per artifact (a second
// caller waits for the first's build and reuses it), so parallel test
// packages never build into the same directory at once. Results are cached
// for the life of the process.
func testbin(args ...string) (string, error) {
	key := strings.Join(args, " ")
	binMu.Lock()
	defer binMu.Unlock()
	if dir, ok := binCache[key]; ok {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", append([]string{filepath.Join(root, "hack", "testbin.sh")}, args...)...)
	cmd.Dir = root
	cmd.Stdout = &stdout
	// A cold build takes minutes: show its progress, and keep it for the
	// error.
	cmd.Stderr = io.MultiWriter(os.Stderr, &stderr)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/testbin.sh %s: %w: %s", key, err, lastStderrLine(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return "", fmt.Errorf("hack/testbin.sh %s printed no directory", key)
	}
	binCache[key] = dir
	return dir, nil
}

// lastStderrLine is the last line of a failed build's output that says
// why, e.g. "go: github.com/nats-io/nats-server/v2@v2.15.99: ... 403
// Forbidden" (the module proxy's own "server response" lines follow it).
func lastStderrLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "server response:") && !strings.HasPrefix(l, "testbin:") {
			return l
		}
	}
	return ""
}

// ControlPlaneBinDir returns the directory holding etcd, kube-apiserver,
// kube-controller-manager and kubectl, building them on first use.
func ControlPlaneBinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir, nil
	}
	return testbin("control-plane")
}

// NatsServerPath returns the path of a nats-server binary of the given
// version (such as "2.15.2"), building it on first use with
// hack/testbin.sh nats <version>.
func NatsServerPath(version string) (string, error) {
	dir, err := testbin("nats", version)
	if err != nil {
		return "", fmt.Errorf("building nats-server %s: %w", version, err)
	}
	path := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("hack/testbin.sh nats %s printed %q: %w", version, dir, err)
	}
	return path, nil
}

// NatsServerBinary returns the path of a nats-server binary of the given
// version (such as "2.15.2"), building it on first use with
// hack/testbin.sh nats <version>. It fails the test if that is impossible.
func NatsServerBinary(t testing.TB, version string) string {
	t.Helper()
	path, err := NatsServerPath(version)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// ExporterVersion is the version of prometheus-nats-exporter that
// ExporterPath builds: the source vendored in
// third_party/prometheus-nats-exporter.
const ExporterVersion = "0.20.1"

// ExporterPath returns the path of a prometheus-nats-exporter binary
// (ExporterVersion), building it on first use with hack/testbin.sh exporter
// from the source vendored in third_party/prometheus-nats-exporter (the Go
// module proxy does not serve the module).
func ExporterPath() (string, error) {
	dir, err := testbin("exporter")
	if err != nil {
		return "", fmt.Errorf("building prometheus-nats-exporter %s: %w", ExporterVersion, err)
	}
	path := filepath.Join(dir, "prometheus-nats-exporter")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("hack/testbin.sh exporter printed %q: %w", dir, err)
	}
	return path, nil
}

// ExporterBinary is ExporterPath, failing the test if the binary cannot be
// built.
func ExporterBinary(t testing.TB) string {
	t.Helper()
	path, err := ExporterPath()
	if err != nil {
		t.Fatal(err)
	}
	return path
}
