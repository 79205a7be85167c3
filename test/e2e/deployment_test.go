package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// controllerImage is the image of manifests/controller/operator.yaml, which
// the local node runs as the controller binary built from this checkout.
const controllerImage = "ghcr.io/nats-operator/nats-operator"

// kubectl apply -k manifests/ runs the controller as users run it: the
// Deployment of manifests/controller/operator.yaml (two replicas, leader
// election, probes, restricted security context), its pods given what a
// kubelet gives (a service-account token from the TokenRequest API at
// /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST
// and _PORT, the downward-API env), so the controller runs with in-cluster
// config. One replica holds the Lease and the example cluster becomes
// Ready and Settled. Deleting the leading pod mid-rollout hands the Lease
// to the other replica within the lease duration, and the rollout
// completes with every server restarted once.
func TestKubectlApplyKRunsTheControllerDeployment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.StartStackWithoutController(ctx, t, localnode.Options{
		Images: map[string]string{controllerImage: framework.ControllerBinary(t)},
	})
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if out, err := s.Env.Kubectl("apply", "-k", filepath.Join(root, "manifests")).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -k manifests/: %v\n%s", err, out)
	}

	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, "the Deployment to be 2/2 Ready", func() error {
		d, err := s.Kube.AppsV1().Deployments("nats-system").Get(ctx, "nats-operator", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ReadyReplicas != 2 || d.Status.UpdatedReplicas != 2 {
			return fmt.Errorf("ready %d updated %d of %d; %s", d.Status.ReadyReplicas, d.Status.UpdatedReplicas, *d.Spec.Replicas, controllerPods(ctx, s))
		}
		return nil
	})
	t.Logf("Deployment 2/2 Ready %s after kubectl apply -k", time.Since(begin).Round(time.Millisecond))
	leader := leaderPod(ctx, t, s, "")
	t.Logf("the Lease is held by pod %s", leader)

	// The pod runs with the kubelet's service-account volume: its token
	// is a real one, accepted by the API server (the controller's
	// requests succeed: it leads), and the container sees it where
	// rest.InClusterConfig reads it.
	pod, err := s.Kube.CoreV1().Pods("nats-system").Get(ctx, leader, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saMount := false
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		saMount = saMount || m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount"
	}
	if !saMount {
		t.Errorf("the controller pod has no service-account mount: %+v", pod.Spec.Containers[0].VolumeMounts)
	}

	nc := settledCluster(ctx, t, s, "2.15.1")
	t.Logf("example cluster Ready and Settled %s after kubectl apply -k: %s", time.Since(begin).Round(time.Millisecond), framework.Conditions(nc))

	tr, err := s.StartTracker(ctx, "nats", "demo", servers, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Stop()
	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.2"}}`)

	// Mid-rollout: once the first server has been restarted and is Ready
	// again, the leader's pod is deleted (gracefully, as kubectl delete
	// pod does).
	poll.Eventually(t, 5*time.Minute, 100*time.Millisecond, "the first server restarted", func() error {
		d := tr.Deletions()
		if len(d) == 0 {
			return errors.New("no server restarted yet")
		}
		if _, ok := tr.ReadyAfter(d[0].Pod, d[0].UID, d[0].At); !ok {
			return fmt.Errorf("%s not Ready again yet", d[0].Pod)
		}
		return nil
	})
	deleted := time.Now()
	if err := s.Kube.CoreV1().Pods("nats-system").Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	successor := leaderPod(ctx, t, s, leader)
	handover := time.Since(deleted)
	t.Logf("deleted leading pod %s; pod %s holds the Lease %s later", leader, successor, handover.Round(time.Millisecond))
	if handover > 15*time.Second {
		t.Errorf("the Lease passed to %s %s after the leader's pod was deleted, want within the lease duration (15s)", successor, handover)
	}

	s.WaitSettledUpToDate(ctx, t, "nats", "demo", 10*time.Minute)
	waitVersion(ctx, t, s, "2.15.2")
	tr.Stop()
	for _, srv := range servers {
		if uids := tr.UIDs()[srv+"-0"]; len(uids) != 2 {
			t.Errorf("pod %s had %d UIDs %v, want 2 (restarted exactly once)", srv+"-0", len(uids), uids)
		}
	}
	t.Logf("rollout completed under the new leader, servers restarted in order %v", tr.RestartOrder())

	// No replica hit an RBAC denial.
	list, err := s.Kube.CoreV1().Pods("nats-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nats-operator"})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{leader}
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	for _, name := range names {
		b, _ := os.ReadFile(s.Node.ContainerLogPath("nats-system", name, "nats-operator"))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "forbidden") {
				t.Errorf("controller pod %s hit an RBAC denial: %s", name, l)
			}
		}
	}
}

// leaderPod waits for the Lease to be held by a controller pod other than
// not, and returns the pod's name (the identity is <pod>_<pid>).
func leaderPod(ctx context.Context, t *testing.T, s *framework.Stack, not string) string {
	t.Helper()
	var holder string
	poll.Eventually(t, time.Minute, 100*time.Millisecond, "a controller pod to hold the Lease", func() error {
		lease, err := s.Kube.CoordinationV1().Leases("nats-system").Get(ctx, "nats-operator", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return errors.New("no holder")
		}
		pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
		if pod == not {
			return fmt.Errorf("still held by %s", *lease.Spec.HolderIdentity)
		}
		p, err := s.Kube.CoreV1().Pods("nats-system").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("holder %q: %w", *lease.Spec.HolderIdentity, err)
		}
		if p.Labels["app.kubernetes.io/name"] != "nats-operator" {
			return fmt.Errorf("holder %q is not a controller pod", *lease.Spec.HolderIdentity)
		}
		holder = pod
		return nil
	})
	return holder
}

// controllerPods describes the controller's pods in one line.
func controllerPods(ctx context.Context, s *framework.Stack) string {
	list, err := s.Kube.CoreV1().Pods("nats-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range list.Items {
		d := fmt.Sprintf("%s %s ready=%v", p.Name, p.Status.Phase, kubeutil.PodReady(&p))
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil {
				d += " " + w.Reason + ": " + w.Message
			}
		}
		out = append(out, d)
	}
	return strings.Join(out, "; ")
}
