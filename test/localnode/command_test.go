package localnode_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

func TestCommandRunsANodeUntilInterrupted(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "localnode")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/localnode").CombinedOutput(); err != nil {
		t.Fatalf("building the command: %v\n%s", err, out)
	}
	env := testenv.Start(t, testenv.Options{ControllerManager: true, SkipCRDs: true})
	client := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	root := t.TempDir()
	cmd := exec.Command(bin, "--kubeconfig", env.KubeconfigPath, "--root", root, "--node-name", "cmd-node")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	createNamespace(t, client, "cmd")
	_, err := client.CoreV1().Pods("cmd").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "server"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "nats", Image: natsImage, Args: []string{"-a", "0.0.0.0", "-m", "8222"},
			Ports:          []corev1.ContainerPort{{Name: "monitor", ContainerPort: 8222}},
			ReadinessProbe: httpProbe("/healthz", 1, 3),
		}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	poll.Eventually(t, time.Minute, 200*time.Millisecond, "pod Ready on the command's node", func() error {
		pod, err = client.CoreV1().Pods("cmd").Get(ctx, "server", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Spec.NodeName != "cmd-node" || !kubeutil.PodReady(pod) {
			return fmt.Errorf("node %q ready %v: %s", pod.Spec.NodeName, kubeutil.PodReady(pod), describe(pod))
		}
		return nil
	})
	pid := serverPID(t, root)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("command ended with %v:\n%s", err, out.String())
	}
	if alive := waitDead([]int{pid}, 5*time.Second); len(alive) > 0 {
		t.Errorf("server %d outlived the command", pid)
	}
	t.Logf("command ran pod at %s (server pid %d) and stopped it on SIGTERM", pod.Status.PodIP, pid)
}

// serverPID finds the live nats-server whose HOME (its pod directory) lies
// under root: the command's node runs in another process, so its PIDs are
// out of reach.
func serverPID(t *testing.T, root string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte("nats-server")) {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if bytes.Contains(env, []byte("HOME="+root)) {
			var pid int
			fmt.Sscan(e.Name(), &pid)
			if localnode.ProcessAlive(pid) {
				return pid
			}
		}
	}
	t.Fatalf("no nats-server process of the command under %s", root)
	return 0
}
