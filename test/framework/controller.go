package framework

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-operator/nats-operator/test/testenv"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// ControllerBinary builds cmd/nats-operator, the controller, once per test
// process, as a release builds it (static, -trimpath; internal/release) but
// for the version: so it runs from the image ControllerImageArchive makes,
// and a release built by a test (BuildRelease) only links again.
func ControllerBinary(t testing.TB) string {
	t.Helper()
	bin, err := controllerBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func controllerBinary() (string, error) {
	buildOnce.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "nats-operator-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "nats-operator")
		cmd := exec.Command("go", "build", "-trimpath", "-o", binPath, "./cmd/nats-operator")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/nats-operator: %v\n%s", err, out)
		}
	})
	return binPath, buildErr
}

// KeptDir returns a new directory that is removed when the test passes and
// kept (for its logs) when it fails, or always with NATS_OPERATOR_E2E_KEEP set.
func KeptDir(t testing.TB, what string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nats-operator-e2e-"+what+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("NATS_OPERATOR_E2E_KEEP") == "" {
			_ = os.RemoveAll(dir)
		}
	})
	return dir
}

// RemoveBinaries removes the controller binary built by ControllerBinary
// and the image ControllerImageArchive made of it; call it from TestMain
// after the tests ran.
func RemoveBinaries() {
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
}

// Controller is a running nats-operator process: the controller under test.
type Controller struct {
	// t fails the test when the process cannot start; nil for the
	// package's shared controller, which panics instead.
	t          testing.TB
	bin        string
	args       []string
	Kubeconfig string
	LogPath    string
	HealthURL  string
	// MetricsURL is https://<addr>/metrics, served with a self-signed
	// certificate to the tokens the API server authorizes (Metric sends
	// MetricsToken).
	MetricsURL   string
	MetricsToken string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// InstallRBAC applies manifests/controller/namespace.yaml and
// manifests/rbac as an administrator.
func InstallRBAC(ctx context.Context, t testing.TB, env *testenv.Env) {
	t.Helper()
	if err := ApplyRBAC(ctx, env); err != nil {
		t.Fatalf("installing RBAC: %v", err)
	}
}

// ApplyRBAC is InstallRBAC outside a test (the demo, the scale benchmark).
func ApplyRBAC(ctx context.Context, env *testenv.Env) error {
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	return Apply(ctx, env.Config, "nats-system",
		filepath.Join(root, "manifests", "controller", "namespace.yaml"),
		filepath.Join(root, "manifests", "rbac"))
}

// StartController installs the RBAC manifests and starts the controller as
// the nats-system/nats-operator ServiceAccount, with leader election on.
// Extra args are appended. t.Cleanup stops it.
func StartController(ctx context.Context, t testing.TB, env *testenv.Env, extraArgs ...string) *Controller {
	t.Helper()
	InstallRBAC(ctx, t, env)
	return startController(ctx, t, env, extraArgs...)
}

func startController(ctx context.Context, t testing.TB, env *testenv.Env, extraArgs ...string) *Controller {
	t.Helper()
	c, err := newController(ctx, env, KeptDir(t, "controller"), ControllerBinary(t), extraArgs...)
	if err != nil {
		t.Fatal(err)
	}
	c.t = t
	c.Start()
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("controller log: %s", c.LogPath)
		}
	})
	return c
}

// newController prepares a controller process (not started) running as the
// nats-system/nats-operator ServiceAccount, its kubeconfig and log in dir.
func newController(ctx context.Context, env *testenv.Env, dir, bin string, extraArgs ...string) (*Controller, error) {
	cfg, err := env.ServiceAccountConfig(ctx, "nats-system", "nats-operator")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "controller.kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, cfg); err != nil {
		return nil, err
	}
	health, err := freeAddrErr()
	if err != nil {
		return nil, err
	}
	metrics, err := freeAddrErr()
	if err != nil {
		return nil, err
	}
	return &Controller{
		bin:        bin,
		Kubeconfig: kubeconfig,
		LogPath:    filepath.Join(dir, "controller.log"),
		HealthURL:  "http://" + health,
		MetricsURL: "https://" + metrics + "/metrics",
		// The administrator (system:masters) may get /metrics.
		MetricsToken: env.AdminToken,
		args: append([]string{
			"--kubeconfig", kubeconfig,
			"--leader-elect=true", "--leader-elect-namespace=nats-system",
			"--health-addr", health, "--metrics-addr", metrics, "-v=4",
		}, extraArgs...),
	}, nil
}

// Start starts the process (again).
func (c *Controller) Start() {
	if c.t != nil {
		c.t.Helper()
	}
	if err := c.start(); err != nil {
		if c.t == nil {
			panic(err)
		}
		c.t.Fatal(err)
	}
}

func (c *Controller) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(c.bin, c.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	c.cmd = cmd
	return nil
}

// Kill sends SIGKILL and waits for the process to exit.
func (c *Controller) Kill() { c.signal(syscall.SIGKILL) }

// Stop sends SIGTERM and waits (SIGKILL after 30 s).
func (c *Controller) Stop() { c.signal(syscall.SIGTERM) }

func (c *Controller) signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return
	}
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	_ = syscall.Kill(-c.cmd.Process.Pid, sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	c.cmd = nil
}

// Get returns the status code and body of a GET on url.
func Get(url string) (int, string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// Metric returns the sum of the samples of a metric whose label set
// contains every given label (e.g. `name="natscluster"`), and whether any
// sample matched.
func (c *Controller) Metric(name string, labels ...string) (float64, bool) {
	code, body, err := GetWithToken(c.MetricsURL, c.MetricsToken)
	if err != nil || code != http.StatusOK {
		return 0, false
	}
	return SumMetric(body, name, labels...)
}

// GetWithToken is Get over HTTPS without verifying the server's
// certificate (the controller's metrics certificate is self-signed, as
// Prometheus' insecure_skip_verify scrapes it), with token as the
// Authorization: Bearer header when not empty.
func GetWithToken(url, token string) (int, string, error) {
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the controller's self-signed metrics certificate
	}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// SumMetric parses Prometheus text exposition and sums matching samples.
func SumMetric(body, name string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// Log returns the controller's log so far.
func (c *Controller) Log() string {
	b, _ := os.ReadFile(c.LogPath)
	return string(b)
}

func freeAddrErr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
