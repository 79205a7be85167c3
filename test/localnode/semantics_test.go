package localnode_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// hostPod is a pod whose containers run host commands (sh, sleep).
func hostPod(name string, mutate func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:    "main",
				Image:   "busybox:1.37",
				Command: []string{"sleep", "1000"},
			}},
		},
	}
	mutate(&p.Spec)
	return p
}

func TestKubeletSemanticsOfHostCommandPods(t *testing.T) {
	env := testenv.Start(t, testenv.Options{ControllerManager: true, SkipCRDs: true})
	node, root := startNodeAt(t, env, "localnode")
	client := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	ns := "semantics"
	createNamespace(t, client, ns)
	_, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"token": "s3cret"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pods := []*corev1.Pod{
		hostPod("liveness", func(s *corev1.PodSpec) {
			s.Containers[0].LivenessProbe = &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}},
				PeriodSeconds: 1, FailureThreshold: 1,
			}
		}),
		hostPod("fails", func(s *corev1.PodSpec) {
			s.RestartPolicy = corev1.RestartPolicyNever
			s.Containers[0].Command = []string{"sh", "-c", "exit 3"}
		}),
		hostPod("succeeds", func(s *corev1.PodSpec) {
			s.RestartPolicy = corev1.RestartPolicyNever
			s.InitContainers = []corev1.Container{{
				Name: "init", Image: "busybox:1.37",
				Command:      []string{"sh", "-c", "echo from-init > /work/init.txt"},
				VolumeMounts: []corev1.VolumeMount{{Name: "work", MountPath: "/work"}},
			}}
			s.Containers[0].Command = []string{"sh", "-c", "cat /work/init.txt; cat /etc/podinfo/name; echo; cat /etc/secret/token; echo; echo env $(POD_NAME) $POD_IP $CPU_LIMIT"}
			s.Containers[0].Env = []corev1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				{Name: "CPU_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
			}
			s.Containers[0].VolumeMounts = []corev1.VolumeMount{
				{Name: "work", MountPath: "/work"},
				{Name: "podinfo", MountPath: "/etc/podinfo"},
				{Name: "secret", MountPath: "/etc/secret"},
			}
			s.Volumes = []corev1.Volume{
				{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
					{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
				}}}},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
			}
		}),
		hostPod("steady", func(s *corev1.PodSpec) {}),
		hostPod("stubborn", func(s *corev1.PodSpec) {
			s.TerminationGracePeriodSeconds = ptr.To[int64](2)
			s.Containers[0].Command = []string{"sh", "-c", "trap '' TERM; echo started; while true; do sleep 0.1; done"}
		}),
	}
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) *corev1.Pod {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return &corev1.Pod{}
		}
		return p
	}

	t.Run("a container failing liveness is restarted with backoff", func(t *testing.T) {
		took := poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "two restarts", func() error {
			cs := get("liveness").Status.ContainerStatuses
			if len(cs) == 0 || cs[0].RestartCount < 2 || cs[0].LastTerminationState.Terminated == nil {
				return fmt.Errorf("statuses %+v", cs)
			}
			return nil
		})
		cs := get("liveness").Status.ContainerStatuses[0]
		t.Logf("restartCount %d after %s, last exit code %d", cs.RestartCount, took.Round(time.Millisecond), cs.LastTerminationState.Terminated.ExitCode)
		if code := cs.LastTerminationState.Terminated.ExitCode; code != 143 {
			t.Errorf("last exit code %d, want 143 (SIGTERM)", code)
		}
	})

	t.Run("a failing container with restart policy Never fails the pod", func(t *testing.T) {
		poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "phase Failed", func() error {
			p := get("fails")
			if p.Status.Phase != corev1.PodFailed {
				return fmt.Errorf("phase %s", p.Status.Phase)
			}
			return nil
		})
		if code := get("fails").Status.ContainerStatuses[0].State.Terminated.ExitCode; code != 3 {
			t.Errorf("exit code %d, want 3", code)
		}
	})

	t.Run("init containers, volumes and the downward API reach the container", func(t *testing.T) {
		poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "phase Succeeded", func() error {
			p := get("succeeds")
			if p.Status.Phase != corev1.PodSucceeded {
				return fmt.Errorf("phase %s: %s", p.Status.Phase, describe(p))
			}
			return nil
		})
		p := get("succeeds")
		b, err := os.ReadFile(node.ContainerLogPath(ns, "succeeds", "main"))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("from-init\nsucceeds\ns3cret\nenv succeeds %s %d", p.Status.PodIP, numCPU())
		if !strings.Contains(string(b), want) {
			t.Errorf("log lacks %q:\n%s", want, b)
		}
		if p.Status.InitContainerStatuses[0].State.Terminated == nil || p.Status.InitContainerStatuses[0].State.Terminated.ExitCode != 0 {
			t.Errorf("init container status %+v", p.Status.InitContainerStatuses)
		}
	})

	t.Run("a container ignoring SIGTERM is killed after the grace period", func(t *testing.T) {
		poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "stubborn Ready", func() error {
			if !kubeutil.PodReady(get("stubborn")) {
				return fmt.Errorf("not ready")
			}
			return nil
		})
		start := time.Now()
		if err := client.CoreV1().Pods(ns).Delete(ctx, "stubborn", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		took := poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "pod removed", func() error {
			_, err := client.CoreV1().Pods(ns).Get(ctx, "stubborn", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("still there: %v", err)
		})
		t.Logf("pod removed %s after the delete", took.Round(time.Millisecond))
		if took < 2*time.Second || time.Since(start) > 10*time.Second {
			t.Errorf("removed after %s, want just over the 2s grace period", took)
		}
		b, _ := os.ReadFile(node.ContainerLogPath(ns, "stubborn", "main"))
		if !strings.Contains(string(b), "sending SIGKILL") {
			t.Errorf("log shows no SIGKILL:\n%s", b)
		}
	})

	t.Run("a node started again on the same root runs its pods again and counts the restart", func(t *testing.T) {
		poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "liveness-free pod Ready", func() error {
			if !kubeutil.PodReady(get("steady")) {
				return fmt.Errorf("not ready: %s", describe(get("steady")))
			}
			return nil
		})
		before := get("steady").Status.ContainerStatuses[0].RestartCount
		node.Stop()
		again, err := localnode.New(env.Config, localnode.Options{Root: root, NodeName: "localnode"})
		if err != nil {
			t.Fatal(err)
		}
		if err := again.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(again.Stop)
		took := poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "pod running again", func() error {
			p := get("steady")
			cs := p.Status.ContainerStatuses[0]
			if !kubeutil.PodReady(p) || cs.RestartCount != before+1 || again.ContainerPID(ns, "steady", "main") == 0 || p.Status.PodIP != again.PodAddress(ns, "steady") || len(p.Status.PodIPs) != 1 {
				return fmt.Errorf("restartCount %d, %s", cs.RestartCount, describe(p))
			}
			return nil
		})
		t.Logf("pod running again %s after the node restarted, restartCount %d -> %d", took.Round(time.Millisecond), before, before+1)
	})
}

func numCPU() int { return runtime.NumCPU() }
