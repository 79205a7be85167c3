package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// The package stack.
//
// A test package starts one control plane (etcd, kube-apiserver,
// kube-controller-manager), one local node and one controller, and its
// tests share them, each in a namespace of its own, in parallel
// (t.Parallel; go test's -parallel bounds how many at once). The shared
// controller watches exactly the namespaces registered with
// SharedNamespace, from a package-level var of each test file, so that it
// knows them all before it starts. A test that needs a controller of its
// own (it kills, upgrades or re-flags it, or counts its writes or reads
// its log) asks for OwnController in a namespace it does not register: it
// still shares the control plane and the node, and the two controllers
// never act on the same cluster. StartStack still gives a test a whole
// stack of its own, for what cannot be shared (the node's options, the
// controller installed as its Deployment, cluster-wide objects).
var pkg struct {
	mu         sync.Mutex
	namespaces []string
	started    bool

	once  sync.Once
	base  *Stack
	dir   string
	stops []func()
	err   error

	failed atomic.Bool
}

// SharedNamespace registers namespace name for a test run by the package's
// shared controller and returns it. Call it from a package-level var, so
// that every name is known before the first test starts the stack.
func SharedNamespace(name string) string {
	pkg.mu.Lock()
	defer pkg.mu.Unlock()
	if pkg.started {
		panic("framework.SharedNamespace(" + name + ") after the package stack started: call it from a package-level var")
	}
	if slices.Contains(pkg.namespaces, name) {
		panic("framework.SharedNamespace: " + name + " registered twice")
	}
	pkg.namespaces = append(pkg.namespaces, name)
	return name
}

// Shared returns the package stack for a test working in ns, a namespace
// registered with SharedNamespace, which it creates; s.Controller is the
// shared controller.
func Shared(ctx context.Context, t testing.TB, ns string) *Stack {
	t.Helper()
	pkg.mu.Lock()
	registered := slices.Contains(pkg.namespaces, ns)
	pkg.mu.Unlock()
	if !registered {
		t.Fatalf("namespace %s is not registered with framework.SharedNamespace: the shared controller does not watch it", ns)
	}
	return forTest(ctx, t, ns)
}

// OwnController returns the package's control plane and node for a test
// working in ns, which it creates, with a controller of the test's own
// that watches ns alone (extraArgs appended) and elects its leader on a
// Lease of its own. ns must not be registered with SharedNamespace.
func OwnController(ctx context.Context, t testing.TB, ns string, extraArgs ...string) *Stack {
	t.Helper()
	pkg.mu.Lock()
	registered := slices.Contains(pkg.namespaces, ns)
	pkg.mu.Unlock()
	if registered {
		t.Fatalf("namespace %s is registered with framework.SharedNamespace: the shared controller would act on it too", ns)
	}
	s := forTest(ctx, t, ns)
	args := append([]string{"--namespace=" + ns, "--leader-elect-lease-name=nats-operator-" + ns}, extraArgs...)
	s.Controller = startController(ctx, t, s.Env, args...)
	return s
}

// forTest starts the package stack once and returns a copy of it for one
// test in namespace ns. When the test passed, its namespace is deleted
// afterwards (without waiting), NatsCluster finalizers first released, so
// its servers stop; when it failed, everything is kept for diagnosis and
// the package stack's logs outlive the run.
func forTest(ctx context.Context, t testing.TB, ns string) *Stack {
	t.Helper()
	base, err := startPackageStack(ctx)
	if err != nil {
		t.Fatalf("starting the package stack: %v", err)
	}
	s := *base
	s.NS = ns
	s.CreateNamespace(ctx, t, ns)
	t.Cleanup(func() {
		if t.Failed() {
			pkg.failed.Store(true)
			t.Logf("shared stack kept: pod logs %s, shared controller log %s, control plane logs %s",
				filepath.Join(pkg.dir, "node", "logs"), base.Controller.LogPath, strings.Join(base.Env.LogPaths(), " "))
			return
		}
		s.deleteNamespace(ns)
	})
	return &s
}

// deleteNamespace releases the finalizers of the NatsClusters in ns and
// deletes it, without waiting.
func (s *Stack) deleteNamespace(ns string) {
	ctx := context.Background()
	list, err := s.Nats.ClusterV1beta1().NatsClusters(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, nc := range list.Items {
			_, _ = s.Nats.ClusterV1beta1().NatsClusters(ns).Patch(ctx, nc.Name, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	}
	_ = s.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

// startPackageStack starts the control plane, the node and the shared
// controller once per test process.
func startPackageStack(ctx context.Context) (*Stack, error) {
	pkg.once.Do(func() {
		pkg.mu.Lock()
		pkg.started = true
		namespaces := slices.Clone(pkg.namespaces)
		pkg.mu.Unlock()
		pkg.base, pkg.err = startPackage(context.WithoutCancel(ctx), namespaces)
	})
	return pkg.base, pkg.err
}

func startPackage(ctx context.Context, namespaces []string) (s *Stack, err error) {
	pkg.dir, err = os.MkdirTemp("", "nats-operator-e2e-shared-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			StopShared()
		}
	}()
	env, stopEnv, err := testenv.StartMain(testenv.Options{ControllerManager: true})
	if err != nil {
		return nil, err
	}
	pkg.stops = append(pkg.stops, func() {
		if pkg.failed.Load() {
			env.KeepLogs()
		}
		stopEnv()
	})
	// The node runs the controller's image (the Jobs of NatsBackups and
	// NatsRestores) as the binary built from this checkout.
	bin, err := controllerBinary()
	if err != nil {
		return nil, err
	}
	node, err := localnode.New(env.Config, localnode.Options{Root: filepath.Join(pkg.dir, "node"), Images: map[string]string{ControllerImage: bin}})
	if err != nil {
		return nil, err
	}
	if err := node.Start(ctx); err != nil {
		return nil, err
	}
	pkg.stops = append(pkg.stops, node.Stop)
	if err := ApplyRBAC(ctx, env); err != nil {
		return nil, fmt.Errorf("installing RBAC: %w", err)
	}
	s = newStack(env, node)
	if len(namespaces) > 0 {
		bin, err := controllerBinary()
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(pkg.dir, "controller")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		// Every registered namespace is listed and watched on its own
		// (internal/nsinformers), as the namespaced install does; workers
		// as many as tests that may run at once need.
		c, err := newController(ctx, env, dir, bin, "--namespace="+strings.Join(namespaces, ","),
			"--leader-elect-lease-name=nats-operator-shared", "--workers=4")
		if err != nil {
			return nil, err
		}
		if err := c.start(); err != nil {
			return nil, err
		}
		pkg.stops = append(pkg.stops, c.Stop)
		s.Controller = c
	}
	return s, nil
}

// StopShared stops the package stack, if one started, and removes its
// directory unless a test failed (or NATS_OPERATOR_E2E_KEEP is set). Call
// it from TestMain after m.Run.
func StopShared() {
	for i := len(pkg.stops) - 1; i >= 0; i-- {
		pkg.stops[i]()
	}
	pkg.stops = nil
	if pkg.dir == "" {
		return
	}
	if pkg.failed.Load() || os.Getenv("NATS_OPERATOR_E2E_KEEP") != "" {
		fmt.Fprintf(os.Stderr, "shared stack kept in %s\n", pkg.dir)
		return
	}
	_ = os.RemoveAll(pkg.dir)
}

// newStack is a Stack on env and node, with the test's own clients.
func newStack(env *testenv.Env, node *localnode.Node) *Stack {
	// The test's own clients poll often (the tracker asks for every pod ten
	// times a second); client-go's default of 5 requests a second would
	// throttle them into seconds-long gaps.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	return &Stack{
		Env:  env,
		Node: node,
		Kube: kubernetes.NewForConfigOrDie(cfg),
		Nats: versioned.NewForConfigOrDie(cfg),
	}
}
