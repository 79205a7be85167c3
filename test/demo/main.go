package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	"github.com/nats-operator/nats-operator/pkg/kubectlnats"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

func main() {
	// The demo never outlives the script that runs it (hack/demo.sh): if
	// that dies, the demo is told to stop as by Ctrl-C.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	say("stopped: the controller, the servers, the node and the control plane are gone")
}

func say(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }

func run() (err error) {
	// Ctrl-C (or SIGTERM, or the terminal closing) ends the demo: every
	// deferred stop below runs, then main says so and exits 0. A second
	// Ctrl-C while it stops is ignored: the stops take a few seconds.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	defer func() {
		// What failed because of Ctrl-C (a step cut short) is no error.
		if err != nil && ctx.Err() != nil {
			say("stopping (%v)", err)
			err = nil
		}
	}()
	klog.SetOutput(os.Stderr)

	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	say("starting the local control plane (the first run builds it: several minutes)")
	env, stopEnv, err := testenv.StartMain(testenv.Options{ControllerManager: true})
	if err != nil {
		return err
	}
	defer stopEnv()

	work, err := os.MkdirTemp("", "nats-operator-demo-")
	if err != nil {
		return err
	}
	say("starting the local node (pods run as nats-server processes; logs in %s)", filepath.Join(work, "node", "logs"))
	node, err := localnode.New(env.Config, localnode.Options{Root: filepath.Join(work, "node")})
	if err != nil {
		return err
	}
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop()

	say("building the controller and the kubectl plugin, and starting the controller as ServiceAccount nats-system/nats-operator")
	bin := filepath.Join(work, "bin")
	controller, err := startController(ctx, env, root, work, bin)
	if err != nil {
		return err
	}
	defer func() {
		_ = syscall.Kill(-controller.Process.Pid, syscall.SIGTERM)
		_ = controller.Wait()
	}()

	kube := kubernetes.NewForConfigOrDie(env.Config)
	nats := versioned.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nats"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	example := filepath.Join(root, "manifests", "examples", "natscluster-jetstream.yaml")
	if err := framework.Apply(ctx, env.Config, "nats", example); err != nil {
		return err
	}
	say("applied %s to namespace nats; waiting for Ready and Settled", example)
	for {
		nc, err := nats.ClusterV1beta1().NatsClusters("nats").Get(ctx, "demo", metav1.GetOptions{})
		if err == nil && meta.IsStatusConditionTrue(nc.Status.Conditions, clusterv1beta1.ConditionReady) &&
			meta.IsStatusConditionTrue(nc.Status.Conditions, clusterv1beta1.ConditionSettled) {
			for _, c := range nc.Status.Conditions {
				say("  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
			break
		}
		select {
		case <-ctx.Done():
			say("stopping")
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}

	fmt.Printf(`
The cluster is up. In another shell:

  export KUBECONFIG=%s
  export PATH=%s:$PATH      # kubectl of the control plane, and the plugin kubectl-nats

Watch it:
  kubectl nats status -n nats demo -w              # servers, Settled, the rollout, holds, Events
  kubectl -n nats get natscluster demo -o yaml     # conditions, status.rollout, status.servers
  kubectl -n nats get pods,statefulsets,configmaps
  kubectl -n nats get events -w

Try a version change (one server at a time, highest ordinal first, the meta leader last):
  sed 's/"2.15.2"/"2.15.1"/' %s > /tmp/demo-2.15.1.yaml
  kubectl nats plan -n nats -f /tmp/demo-2.15.1.yaml   # what the controller would do, before it does
  kubectl -n nats patch natscluster demo --type merge -p '{"spec":{"version":"2.15.1"}}'

Pause it, or push one server through:
  kubectl nats pause -n nats demo
  kubectl nats force-step -n nats demo demo-1 --yes
  kubectl nats resume -n nats demo

Clients: %s (pod addresses on loopback)
Controller log: %s   Server logs: %s

Press Ctrl-C to stop everything.

kubectl nats status -n nats demo -w (a new screen each time the cluster changes):
`, env.KubeconfigPath, bin, example, podURLs(ctx, kube), filepath.Join(work, "controller.log"), filepath.Join(work, "node", "logs"))
	// status -w without a terminal prints a new screen only when what it
	// shows changed: each step of what the user does in the other shell.
	kubectlnats.Run(ctx, []string{"--kubeconfig", env.KubeconfigPath, "-n", "nats", "status", "demo", "-w"},
		kubectlnats.IO{In: strings.NewReader(""), Out: os.Stdout, Err: os.Stderr})
	<-ctx.Done()
	say("stopping")
	return nil
}

func podURLs(ctx context.Context, kube kubernetes.Interface) string {
	pods, err := kube.CoreV1().Pods("nats").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "?"
	}
	s := ""
	for _, p := range pods.Items {
		if s != "" {
			s += ","
		}
		s += "nats://" + p.Status.PodIP + ":4222"
	}
	return s
}

// startController builds cmd/nats-operator and cmd/kubectl-nats into bin,
// with kubectl of the control plane beside them (so that `kubectl nats`
// finds the plugin on PATH), and starts the controller as the
// nats-system/nats-operator ServiceAccount, logging to controller.log.
func startController(ctx context.Context, env *testenv.Env, root, work, bin string) (*exec.Cmd, error) {
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return nil, err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), "./cmd/nats-operator", "./cmd/kubectl-nats")
	build.Dir, build.Stdout, build.Stderr = root, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building the controller and the plugin: %w", err)
	}
	if err := os.Symlink(env.KubectlPath(), filepath.Join(bin, "kubectl")); err != nil {
		return nil, err
	}
	if err := framework.ApplyRBAC(ctx, env); err != nil {
		return nil, err
	}
	cfg, err := env.ServiceAccountConfig(ctx, "nats-system", "nats-operator")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(work, "controller.kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, cfg); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(work, "controller.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(bin, "nats-operator"), "--kubeconfig", kubeconfig, "--leader-elect-namespace", "nats-system",
		"--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "-v=2")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, cmd.Start()
}
