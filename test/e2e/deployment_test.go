package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/localnode"
)

// kubectl apply -k manifests/ runs the controller as users run it: the
// Deployment of manifests/controller/operator.yaml (two replicas, leader
// election, probes, restricted security context), its pods running the
// controller's image (internal/image, made of this checkout's binary as
// make image makes it) from the image's own layer, given what a
// kubelet gives (a service-account token from the TokenRequest API at
// /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST
// and _PORT, the downward-API env), so the controller runs with in-cluster
// config. One replica holds the Lease and the example cluster becomes
// Ready and Settled. Deleting the leading pod mid-rollout hands the Lease
// to the other replica within the lease duration, and the rollout
// completes with every server restarted once.
func TestKubectlApplyKRunsTheControllerDeployment(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	_, digest := framework.ControllerImageArchive(t)
	s := framework.StartStackWithoutController(ctx, t, localnode.Options{
		ImageArchives: framework.ControllerImageArchives(t),
	})
	begin := time.Now()
	s.KubectlApplyK(t, "")
	s.WaitControllerDeployment(ctx, t)
	s.CheckControllerImage(ctx, t, digest)
	t.Logf("Deployment 2/2 Ready %s after kubectl apply -k", time.Since(begin).Round(time.Millisecond))
	leader := s.LeaderPod(ctx, t, "")
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

	tr, err := s.StartTracker(ctx, s.NS, "demo", servers, 100*time.Millisecond)
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
	successor := s.LeaderPod(ctx, t, leader)
	handover := time.Since(deleted)
	t.Logf("deleted leading pod %s; pod %s holds the Lease %s later", leader, successor, handover.Round(time.Millisecond))
	if handover > 15*time.Second {
		t.Errorf("the Lease passed to %s %s after the leader's pod was deleted, want within the lease duration (15s)", successor, handover)
	}

	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 10*time.Minute)
	waitVersion(ctx, t, s, "2.15.2")
	tr.Stop()
	for _, srv := range servers {
		if uids := tr.UIDs()[srv+"-0"]; len(uids) != 2 {
			t.Errorf("pod %s had %d UIDs %v, want 2 (restarted exactly once)", srv+"-0", len(uids), uids)
		}
	}
	t.Logf("rollout completed under the new leader, servers restarted in order %v", tr.RestartOrder())

	// No replica hit an RBAC denial.
	s.CheckNoRBACDenial(t, append(s.ControllerPodNames(ctx, t), leader)...)
}
