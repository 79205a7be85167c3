package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const helperEnv = "TESTENV_HELPER_HOLD"

// TESTENV_CRD_DIR, when set, makes the tests install the CRDs of that
// directory instead of manifests/crds (to try a CRD change before it is
// generated).

// TestControlPlaneWorksAndLeavesNoProcessBehind starts the whole control
// plane, checks what tests rely on (CRDs, RBAC, garbage collection,
// StatefulSets, kubectl), stops it and checks that no process survives.
func TestControlPlaneWorksAndLeavesNoProcessBehind(t *testing.T) {
	env, err := start(Options{ControllerManager: true, CRDDir: os.Getenv("TESTENV_CRD_DIR")}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			t.Logf("logs: %v", env.LogPaths())
			env.keepDir = true
			env.Stop()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := kubernetes.NewForConfigOrDie(env.Config)

	t.Run("the CRDs of manifests/crds are served", func(t *testing.T) {
		dyn := dynamic.NewForConfigOrDie(env.Config)
		for _, gvr := range []schema.GroupVersionResource{
			{Group: "cluster.nats-operator.io", Version: "v1beta1", Resource: "natsclusters"},
			{Group: "nats-operator.io", Version: "v1beta1", Resource: "natsoperatortrusts"},
			{Group: "nats-operator.io", Version: "v1beta1", Resource: "natsaccounttrusts"},
		} {
			if _, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{}); err != nil {
				t.Errorf("listing %s: %v", gvr.Resource, err)
			}
		}
	})

	t.Run("RBAC is enforced for a ServiceAccount", func(t *testing.T) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}
		if _, err := client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg, err := env.ServiceAccountConfig(ctx, "default", "nobody")
		if err != nil {
			t.Fatal(err)
		}
		_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("listing pods without permission: got %v, want Forbidden", err)
		}
	})

	t.Run("the garbage collector deletes owned objects", func(t *testing.T) {
		owner, err := client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}}}}
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, owned, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().ConfigMaps("default").Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().ConfigMaps("default").Get(ctx, "owned", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("owned ConfigMap still there after its owner was deleted: %v", err)
		}
	})

	t.Run("the StatefulSet controller makes pods", func(t *testing.T) {
		labels := map[string]string{"app": "web"}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.StatefulSetSpec{
				Replicas:            ptr.To[int32](1),
				ServiceName:         "web",
				PodManagementPolicy: appsv1.ParallelPodManagement,
				Selector:            &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example"}}},
				},
			},
		}
		if _, err := client.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("no pod web-0: %v", err)
		}
	})

	t.Run("kubectl talks to the apiserver", func(t *testing.T) {
		out, err := env.Kubectl("get", "namespace", "default", "-o", "name").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "namespace/default" {
			t.Fatalf("kubectl get namespace default: %v: %s", err, out)
		}
	})

	pids := env.pids()
	if len(pids) != 3 {
		t.Fatalf("got %d processes, want etcd, kube-apiserver and kube-controller-manager", len(pids))
	}
	begin := time.Now()
	env.Stop()
	stopped = true
	t.Logf("stopped in %v", time.Since(begin).Round(time.Millisecond))
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d is still running after Stop", pid)
		}
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still has members after Stop (kill: %v)", pid, err)
		}
	}
	if _, err := os.Stat(env.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Stop: %v", env.Dir, err)
	}
}

// TestControlPlaneDiesWithTheTestProcess kills a test binary that holds a
// control plane, without letting it clean up, and checks that its etcd and
// kube-apiserver die with it.
func TestControlPlaneDiesWithTheTestProcess(t *testing.T) {
	for _, tc := range []struct {
		name   string
		signal syscall.Signal
	}{
		{"a test binary killed with SIGKILL takes its control plane with it", syscall.SIGKILL},
		{"a test binary interrupted with SIGINT takes its control plane with it", syscall.SIGINT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsControlPlane$", "-test.v")
			cmd.Env = append(os.Environ(), helperEnv+"=1")
			cmd.Stderr = os.Stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

			lines := make(chan string)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			var pids []int
			var dir string
			timeout := time.After(5 * time.Minute)
			for pids == nil {
				select {
				case line, ok := <-lines:
					if !ok {
						t.Fatal("the helper exited before reporting its processes")
					}
					if rest, ok := strings.CutPrefix(line, "HOLDING "); ok {
						fields := strings.Fields(rest)
						dir = fields[0]
						for _, f := range fields[1:] {
							pid, _ := strconv.Atoi(f)
							pids = append(pids, pid)
						}
					}
				case <-timeout:
					t.Fatal("the helper did not start a control plane in time")
				}
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			go func() {
				for range lines {
				}
			}()
			if len(pids) != 2 {
				t.Fatalf("helper reported %d processes, want etcd and kube-apiserver", len(pids))
			}
			for _, pid := range pids {
				if !alive(pid) {
					t.Fatalf("process %d is not running while the helper holds it", pid)
				}
			}

			begin := time.Now()
			if err := cmd.Process.Signal(tc.signal); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			err = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				for _, pid := range pids {
					if alive(pid) {
						return false, nil
					}
				}
				return true, nil
			})
			if err != nil {
				for _, pid := range pids {
					if alive(pid) {
						t.Errorf("process %d outlived the test binary", pid)
						_ = syscall.Kill(-pid, syscall.SIGKILL)
					}
				}
				return
			}
			t.Logf("control plane gone %v after the test binary got %v", time.Since(begin).Round(time.Millisecond), tc.signal)
		})
	}
}

// TestHelperHoldsControlPlane is run by TestControlPlaneDiesWithTheTestProcess
// in a child test binary: it starts a control plane, reports its processes
// and waits to be killed.
func TestHelperHoldsControlPlane(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("run only as a child of TestControlPlaneDiesWithTheTestProcess")
	}
	env, err := start(Options{SkipCRDs: true}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "HOLDING %s", env.Dir)
	for _, pid := range env.pids() {
		fmt.Fprintf(&b, " %d", pid)
	}
	fmt.Println(b.String())
	time.Sleep(10 * time.Minute) // killed long before
	env.Stop()
}

func TestNatsServerBinaryReportsTheVersionAskedFor(t *testing.T) {
	path := NatsServerBinary(t, "2.15.2")
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v: %s", path, err, out)
	}
	if !strings.Contains(string(out), "v2.15.2") {
		t.Fatalf("%s --version = %q, want v2.15.2", path, out)
	}
}

// The exporter is built from third_party/prometheus-nats-exporter, with the
// version of that source.
func TestExporterBinaryReportsTheVendoredVersion(t *testing.T) {
	path := ExporterBinary(t)
	out, err := exec.Command(path, "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s -version: %v: %s", path, err, out)
	}
	if want := "prometheus-nats-exporter version " + ExporterVersion; strings.TrimSpace(string(out)) != want {
		t.Fatalf("%s -version = %q, want %q", path, out, want)
	}
}

// pids returns the process ids of the control-plane processes.
func (e *Env) pids() []int {
	var pids []int
	for _, p := range e.procs {
		pids = append(pids, p.pid())
	}
	return pids
}

// alive reports whether pid is a running process (a zombie is not running).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses: "pid (comm) S ...".
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
