package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
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

	say("building and starting the controller as ServiceAccount nats-system/nats-operator")
	controller, err := startController(ctx, env, root, work)
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
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}

	fmt.Printf(`
The cluster is up. In another shell:

  export KUBECONFIG=%s
  alias kubectl=%s

Watch it:
  kubectl -n nats get natscluster demo -w
  kubectl -n nats get natscluster demo -o yaml      # conditions, status.rollout, status.servers
  kubectl -n nats get pods,statefulsets,configmaps
  kubectl -n nats get events -w

Try a version change (one server at a time, highest ordinal first, the meta leader last):
  kubectl -n nats patch natscluster demo --type merge -p '{"spec":{"version":"2.15.1"}}'

Pause it, or push one server through:
  kubectl -n nats patch natscluster demo --type merge -p '{"spec":{"rollout":{"paused":true}}}'
  kubectl -n nats annotate natscluster demo cluster.nats-operator.io/force-step=demo-1

Clients: %s (pod addresses on loopback)
Controller log: %s   Server logs: %s
Press Ctrl-C to stop everything.
`, env.KubeconfigPath, env.KubectlPath(), podURLs(ctx, kube), filepath.Join(work, "controller.log"), filepath.Join(work, "node", "logs"))
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

// startController builds cmd/nats-operator and starts it as the
// nats-system/nats-operator ServiceAccount, logging to controller.log.
func startController(ctx context.Context, env *testenv.Env, root, work string) (*exec.Cmd, error) {
	bin := filepath.Join(work, "nats-operator")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/nats-operator")
	build.Dir, build.Stdout, build.Stderr = root, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building the controller: %w", err)
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
	cmd := exec.Command(bin, "--kubeconfig", kubeconfig, "--leader-elect-namespace", "nats-system",
		"--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "-v=2")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, cmd.Start()
}
