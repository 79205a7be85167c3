package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/nats-operator/nats-operator/internal/testport"
)

// Options choose what the control plane runs.
type Options struct {
	// ControllerManager also runs kube-controller-manager (every controller
	// but serviceaccount-token and the endpoint controllers: the garbage
	// collector, StatefulSets, ...).
	// Pods stay Pending: there is no node or scheduler.
	ControllerManager bool
	// ControllerManagerArgs are more arguments of kube-controller-manager
	// (the scale benchmark's --kcm-args: "--kube-api-qps=100").
	ControllerManagerArgs []string
	// CRDDir is the directory of CRD manifests to install; default
	// <repo>/manifests/crds.
	CRDDir string
	// SkipCRDs installs no CRDs.
	SkipCRDs bool
}

// Env is a running control plane.
type Env struct {
	// Config is an administrator's (system:masters) client configuration.
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file for Config, for programs and kubectl.
	KubeconfigPath string
	// Dir holds the logs, certificates, keys and etcd's data. It is removed
	// when the environment stops, unless the test failed.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kubectl.
	BinDir string
	// Options are the options the environment started with.
	Options Options

	// APIServerURL is https://127.0.0.1:<port>.
	APIServerURL string
	// EtcdURL is http://127.0.0.1:<port>.
	EtcdURL string
	// CAFile is the CA certificate (PEM) that signs the apiserver's serving
	// certificate.
	CAFile string
	// AdminToken is the bearer token of Config.
	AdminToken string
	// ServiceAccountKeyFile is the RSA key (PEM) that signs service account
	// tokens.
	ServiceAccountKeyFile string

	procs    []*process // in start order
	stopOnce sync.Once
	keepDir  bool
	logf     func(format string, args ...any)
}

// Start starts a control plane for the test; t.Cleanup stops it. On failure
// to start it fails the test, printing the tail of the failed process's log.
// When the test fails, the logs are kept and their paths printed.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	env, err := start(opts, t.Logf)
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			env.keepDir = true
			t.Logf("control plane logs kept: %s", strings.Join(env.LogPaths(), " "))
		}
		env.Stop()
	})
	return env
}

// KeepLogs keeps the control plane's directory (its logs) when it stops.
func (e *Env) KeepLogs() { e.keepDir = true }

// StartMain starts a control plane outside of a test, for TestMain. The
// returned function stops it and removes its directory; set
// NATS_OPERATOR_TESTENV_KEEP=1 to keep the logs.
func StartMain(opts Options) (*Env, func(), error) {
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "testenv: "+format+"\n", args...) }
	env, err := start(opts, logf)
	if err != nil {
		return nil, func() {}, err
	}
	if os.Getenv("NATS_OPERATOR_TESTENV_KEEP") != "" {
		env.keepDir = true
	}
	return env, env.Stop, nil
}

// start brings up etcd, kube-apiserver and, if asked, the
// kube-controller-manager, and installs the CRDs. On error everything
// already started is stopped.
func start(opts Options, logf func(string, ...any)) (env *Env, err error) {
	begin := time.Now()
	binDir, err := ControlPlaneBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nats-operator-testenv-")
	if err != nil {
		return nil, err
	}
	env = &Env{Dir: dir, BinDir: binDir, Options: opts, logf: logf}
	defer func() {
		if err != nil {
			env.keepDir = true
			env.Stop()
			err = fmt.Errorf("%w (logs in %s)", err, dir)
		}
	}()
	if opts.CRDDir == "" && !opts.SkipCRDs {
		root, err := RepoRoot()
		if err != nil {
			return env, err
		}
		env.Options.CRDDir = filepath.Join(root, "manifests", "crds")
	}
	if err := env.writeCredentials(); err != nil {
		return env, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := env.startEtcd(ctx); err != nil {
		return env, err
	}
	if err := env.startAPIServer(ctx); err != nil {
		return env, err
	}
	// CRDs first: the garbage collector discovers resource kinds when it
	// starts and then only every 30 s, so owners of a kind installed after
	// it started would have their dependents collected up to 30 s late.
	if !opts.SkipCRDs {
		if err := env.InstallCRDs(ctx, env.Options.CRDDir); err != nil {
			return env, err
		}
	}
	if opts.ControllerManager {
		if err := env.startControllerManager(ctx); err != nil {
			return env, err
		}
	}
	logf("control plane up in %v at %s (dir %s)", time.Since(begin).Round(time.Millisecond), env.APIServerURL, dir)
	return env, nil
}

// Stop stops the kube-controller-manager, then the kube-apiserver, then
// etcd, killing each process group, and removes Dir unless the logs are
// kept. It is safe to call more than once.
func (e *Env) Stop() {
	e.stopOnce.Do(func() {
		// Reverse start order: the apiserver hangs when etcd goes first.
		for i := len(e.procs) - 1; i >= 0; i-- {
			e.procs[i].stop(5 * time.Second)
		}
		if !e.keepDir {
			_ = os.RemoveAll(e.Dir)
		}
	})
}

// LogPaths returns the log files of the control-plane processes.
func (e *Env) LogPaths() []string {
	var paths []string
	for _, p := range e.procs {
		paths = append(paths, p.logPath)
	}
	return paths
}

// KubectlPath returns the path of the kubectl binary.
func (e *Env) KubectlPath() string { return filepath.Join(e.BinDir, "kubectl") }

// Kubectl returns a kubectl command talking to the control plane as an
// administrator.
func (e *Env) Kubectl(args ...string) *exec.Cmd {
	return exec.Command(e.KubectlPath(), append([]string{"--kubeconfig", e.KubeconfigPath}, args...)...)
}

// ServiceAccountConfig returns a client configuration authenticating as the
// ServiceAccount namespace/name, with a token from the TokenRequest API. The
// ServiceAccount must exist; it has only the permissions RBAC grants it.
func (e *Env) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	client, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// WriteKubeconfig writes a kubeconfig file for cfg (bearer token and CA
// data only) to path.
func WriteKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["testenv"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["testenv"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["testenv"] = &clientcmdapi.Context{Cluster: "testenv", AuthInfo: "testenv", Namespace: "default"}
	kc.CurrentContext = "testenv"
	return clientcmd.WriteToFile(*kc, path)
}

// writeCredentials writes the admin token file and the service account key.
func (e *Env) writeCredentials() error {
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	e.AdminToken = hex.EncodeToString(tok)
	line := e.AdminToken + ",testenv-admin,testenv-admin,system:masters\n"
	if err := os.WriteFile(filepath.Join(e.Dir, "tokens.csv"), []byte(line), 0o600); err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	e.ServiceAccountKeyFile = filepath.Join(e.Dir, "sa.key")
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return os.WriteFile(e.ServiceAccountKeyFile, keyPEM, 0o600)
}

// freePort returns a loopback port that was free a moment ago, below the
// ephemeral range so that no client connection takes it first. A process
// that still loses the race to another test binary fails with "address
// already in use" and is restarted on other ports.
func freePort() (int, error) { return testport.Pick("127.0.0.1") }

// startRetrying starts a process with fresh ports until it is ready, up to
// three times when it lost a port to someone else.
func (e *Env) startRetrying(ctx context.Context, name string, launch func() (*process, error), ready func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		p, err := launch()
		if err != nil {
			return err
		}
		err = waitReady(ctx, p, ready)
		if err == nil {
			e.procs = append(e.procs, p)
			return nil
		}
		p.stop(time.Second)
		if attempt < 3 && p.addrInUse() {
			e.logf("%s lost a port to another process; retrying on other ports", name)
			continue
		}
		return fmt.Errorf("%s: %w; last lines of %s:\n%s", name, err, p.logPath, p.logTail(30))
	}
}

// waitReady polls ready until it succeeds, the process exits or ctx ends.
func waitReady(ctx context.Context, p *process, ready func(context.Context) error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("%w before it was ready: %v", errExited, p.waitErr)
		}
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready in time: %v", last)
		case <-tick.C:
		}
	}
}

func (e *Env) startEtcd(ctx context.Context) error {
	return e.startRetrying(ctx, "etcd", func() (*process, error) {
		client, err := freePort()
		if err != nil {
			return nil, err
		}
		peer, err := freePort()
		if err != nil {
			return nil, err
		}
		dataDir := filepath.Join(e.Dir, "etcd-data")
		_ = os.RemoveAll(dataDir)
		if err := os.Mkdir(dataDir, 0o700); err != nil {
			return nil, err
		}
		e.EtcdURL = "http://127.0.0.1:" + strconv.Itoa(client)
		peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
		return startProcess("etcd", e.Dir, filepath.Join(e.BinDir, "etcd"),
			"--name=default",
			"--data-dir="+dataDir,
			"--listen-client-urls="+e.EtcdURL,
			"--advertise-client-urls="+e.EtcdURL,
			"--listen-peer-urls="+peerURL,
			"--initial-advertise-peer-urls="+peerURL,
			"--initial-cluster=default="+peerURL,
			"--unsafe-no-fsync",
			"--log-level=warn",
		)
	}, func(ctx context.Context) error {
		return httpGet(ctx, http.DefaultClient, e.EtcdURL+"/health", `"health":"true"`)
	})
}

func (e *Env) startAPIServer(ctx context.Context) error {
	certDir := filepath.Join(e.Dir, "apiserver-certs")
	var client *http.Client
	err := e.startRetrying(ctx, "kube-apiserver", func() (*process, error) {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		_ = os.RemoveAll(certDir)
		e.APIServerURL = "https://127.0.0.1:" + strconv.Itoa(port)
		e.CAFile = filepath.Join(certDir, "apiserver.crt")
		client = nil
		// No --enable-admission-plugins or --disable-admission-plugins: the
		// default set applies, as on a real cluster, among them
		// PersistentVolumeClaimResize, which lets a claim grow only when its
		// StorageClass allows expansion (test/localnode/resize.go).
		return startProcess("kube-apiserver", e.Dir, filepath.Join(e.BinDir, "kube-apiserver"),
			"--etcd-servers="+e.EtcdURL,
			"--bind-address=127.0.0.1",
			"--secure-port="+strconv.Itoa(port),
			"--advertise-address=127.0.0.1",
			"--endpoint-reconciler-type=none",
			"--cert-dir="+certDir,
			"--token-auth-file="+filepath.Join(e.Dir, "tokens.csv"),
			"--authorization-mode=Node,RBAC",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file="+e.ServiceAccountKeyFile,
			"--service-account-signing-key-file="+e.ServiceAccountKeyFile,
			"--service-cluster-ip-range=10.96.0.0/16",
			"--allow-privileged=true",
			"--profiling=false",
		)
	}, func(ctx context.Context) error {
		if client == nil {
			c, err := e.httpClient()
			if err != nil {
				return err // the certificate is not written yet
			}
			client = c
		}
		return httpGet(ctx, client, e.APIServerURL+"/readyz", "ok")
	})
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(e.CAFile)
	if err != nil {
		return err
	}
	e.Config = &rest.Config{
		Host:            e.APIServerURL,
		BearerToken:     e.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		QPS:             100,
		Burst:           200,
	}
	e.KubeconfigPath = filepath.Join(e.Dir, "kubeconfig")
	return WriteKubeconfig(e.KubeconfigPath, e.Config)
}

// httpClient trusts the apiserver's CA and sends the admin token.
func (e *Env) httpClient() (*http.Client, error) {
	ca, err := os.ReadFile(e.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", e.CAFile)
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: bearer{token: e.AdminToken, next: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool},
		}},
	}, nil
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// httpGet succeeds when url answers 200 with a body containing want.
func httpGet(ctx context.Context, client *http.Client, url, want string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

func (e *Env) startControllerManager(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	return e.startRetrying(ctx, "kube-controller-manager", func() (*process, error) {
		args := []string{
			"--kubeconfig=" + e.KubeconfigPath,
			"--authentication-kubeconfig=" + e.KubeconfigPath,
			"--authorization-kubeconfig=" + e.KubeconfigPath,
			"--bind-address=127.0.0.1",
			"--secure-port=0",
			"--leader-elect=false",
			// The endpoint and EndpointSlice controllers would only report that
			// pod addresses on loopback are invalid for EndpointSlices.
			"--controllers=*,-serviceaccount-token,-endpointslice-controller,-endpointslice-mirroring-controller,-endpoints-controller",
			"--service-account-private-key-file=" + e.ServiceAccountKeyFile,
			"--root-ca-file=" + e.CAFile,
		}
		return startProcess("kube-controller-manager", e.Dir, filepath.Join(e.BinDir, "kube-controller-manager"), append(args, e.Options.ControllerManagerArgs...)...)
	}, func(ctx context.Context) error {
		// The serviceaccount controller makes each namespace's default
		// ServiceAccount; once it exists the controllers are running.
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return errors.New("no default ServiceAccount yet")
		}
		return err
	})
}
