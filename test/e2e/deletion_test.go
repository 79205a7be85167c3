package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// deleteCluster deletes the NatsCluster name of the test's namespace (in
// the background, as kubectl delete does).
func deleteCluster(ctx context.Context, t *testing.T, s *framework.Stack, name string) {
	t.Helper()
	if err := s.Nats.ClusterV1beta1().NatsClusters(s.NS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting NatsCluster %s/%s: %v", s.NS, name, err)
	}
}

// waitClusterGone waits until the NatsCluster name is gone, then until the
// garbage collector has deleted its StatefulSets, and returns how long the
// NatsCluster took.
func waitClusterGone(ctx context.Context, t *testing.T, s *framework.Stack, name string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	poll.Eventually(t, timeout, 100*time.Millisecond, "the NatsCluster to be gone", func() error {
		nc, err := s.Cluster(ctx, s.NS, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there (finalizers %v): %s", nc.Finalizers, framework.Conditions(nc))
	})
	gone := time.Since(start)
	poll.Eventually(t, timeout, 250*time.Millisecond, "the StatefulSets to be gone", func() error {
		stss, err := s.Kube.AppsV1().StatefulSets(s.NS).List(ctx, metav1.ListOptions{LabelSelector: clusterv1beta1.LabelCluster + "=" + name})
		if err != nil {
			return err
		}
		if n := len(stss.Items); n > 0 {
			return fmt.Errorf("%d StatefulSets left", n)
		}
		return nil
	})
	t.Logf("the NatsCluster %s was gone after %s, its StatefulSets after %s", name, gone.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	return gone
}

// Deleting a NatsCluster whose JetStream holds a stream waits: the
// NatsCluster stays with Progressing=False Deleting naming $G/ORDERS and the
// way out, and its StatefulSets, ConfigMaps and pods stay untouched while
// the test watches (heldFor; that a held deletion is decided again on every
// sync and writes nothing is proven in pkg/controller, deletion_test.go).
// Annotating force-delete lets it go: the NatsCluster and its StatefulSets
// are gone within 60 s, and the claims are kept.
//
// Beside it, in the same namespace, a cluster "empty" whose JetStream holds
// no stream goes at once: the controller releases its finalizer on the
// sync the deletion triggers, and the NatsCluster is gone within 30 s. Its
// claims go too, as its volumeClaimTemplate says whenDeleted: Delete.
func TestDeletingAClusterHoldingStreamsWaitsForForceDelete(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsDeletion)
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			o.SetName("empty")
			_ = unstructured.SetNestedField(o.Object, string(clusterv1beta1.ClaimDelete), "spec", "jetstream", "volumeClaimTemplate", "whenDeleted")
		}
	})
	nc := settledCluster(ctx, t, s, "")
	s.WaitSettledUpToDate(ctx, t, s.NS, "empty", 3*time.Minute)

	// The empty cluster goes at once, and its claims with it.
	deleteCluster(ctx, t, s, "empty")
	waitClusterGone(ctx, t, s, "empty", 30*time.Second)
	// whenDeleted: Delete. A claim goes once kube-controller-manager's
	// pvc-protection controller has seen that no pod uses it.
	for i := range 3 {
		claim := fmt.Sprintf("data-empty-%d-0", i)
		poll.Eventually(t, time.Minute, 250*time.Millisecond, "claim "+claim+" deleted", func() error {
			if _, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, claim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
	}

	if !strings.Contains(strings.Join(nc.Finalizers, " "), clusterv1beta1.FinalizerStreams) {
		t.Fatalf("finalizers %v, want %s", nc.Finalizers, clusterv1beta1.FinalizerStreams)
	}
	conn := framework.Connect(t, s.PodURLs(ctx, t, s.NS, "demo"))
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	publishN(ctx, t, js, "ORDERS", 3, 10) // creates the R3 stream ORDERS

	msg := deleteHeld(ctx, t, s, "demo")
	requireContains(t, "the hold message", msg, "JetStream holds 1 stream ($G/ORDERS)", clusterv1beta1.AnnotationForceDelete, "claims are kept")

	// The hold stands: nothing of the cluster changes, the cluster keeps
	// serving.
	before := objectVersions(ctx, t, s, s.NS)
	if n := strings.Count(fmt.Sprint(before), "statefulset/"); n != 3 {
		t.Fatalf("%d StatefulSets while held, want 3: %v", n, before)
	}
	const hold = heldFor
	end := time.Now().Add(hold)
	for time.Now().Before(end) {
		c, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			t.Fatalf("while held: %v", err)
		}
		if err := framework.CheckCondition(c, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, clusterv1beta1.ReasonDeleting); err != nil {
			t.Fatalf("while held: %v", err)
		}
		time.Sleep(time.Second)
	}
	if after := objectVersions(ctx, t, s, s.NS); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("objects changed while the deletion was held:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := js.Stream(ctx, "ORDERS"); err != nil {
		t.Errorf("stream ORDERS after the hold: %v", err)
	}
	t.Logf("held Deleting for %s: no StatefulSet, ConfigMap or pod changed", hold)
	if evs, err := s.Events(ctx, s.NS, "demo", clusterv1beta1.ReasonDeleting); err != nil || len(evs) == 0 {
		t.Errorf("no Deleting Event (%v)", err)
	}

	patchCluster(ctx, t, s, `{"metadata":{"annotations":{"`+clusterv1beta1.AnnotationForceDelete+`":"true"}}}`)
	waitClusterGone(ctx, t, s, "demo", time.Minute)
	for i := range 3 {
		claim := fmt.Sprintf("data-demo-%d-0", i)
		if _, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, claim, metav1.GetOptions{}); err != nil {
			t.Errorf("claim %s after the deletion: %v, want it kept", claim, err)
		}
	}
}

// deleteHeld deletes the NatsCluster name and waits for the deletion to be
// held (Progressing=False Deleting), returning the hold's message.
func deleteHeld(ctx context.Context, t *testing.T, s *framework.Stack, name string) string {
	t.Helper()
	deleteCluster(ctx, t, s, name)
	var held *clusterv1beta1.NatsCluster
	poll.Eventually(t, time.Minute, 250*time.Millisecond, "Progressing=False Deleting", func() error {
		c, err := s.Cluster(ctx, s.NS, name)
		if err != nil {
			return err
		}
		held = c
		return framework.CheckCondition(c, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, clusterv1beta1.ReasonDeleting)
	})
	msg := conditionOf(held, clusterv1beta1.ConditionProgressing).Message
	t.Logf("held: %s", msg)
	return msg
}

// claimUIDs returns the UID of every claim of the namespace by name.
func claimUIDs(ctx context.Context, t *testing.T, s *framework.Stack) map[string]string {
	t.Helper()
	list, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range list.Items {
		out[c.Name] = string(c.UID)
	}
	return out
}

// Servers that do not answer are unknown, not empty: with every server of
// a cluster holding ORDERS hung (SIGSTOP: their pods run, nothing answers)
// and whenDeleted: Delete, kubectl delete natscluster holds with Deleting
// naming the servers that did not answer, and 60 s later the NatsCluster
// and every claim are still there. Once the servers answer again the hold
// names ORDERS.
func TestDeletingAClusterWhoseServersAreSilentWaits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsDeletionSilent)
	s.CreateNamespace(ctx, t, s.NS)
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() != "NatsCluster" {
			return
		}
		_ = unstructured.SetNestedField(o.Object, "Delete", "spec", "jetstream", "volumeClaimTemplate", "whenDeleted")
		// The liveness probe would restart a stopped server after 90 s;
		// this test needs them silent for longer.
		_ = unstructured.SetNestedSlice(o.Object, []any{map[string]any{"name": "nats", "livenessProbe": map[string]any{"failureThreshold": int64(40)}}},
			"spec", "podTemplate", "spec", "containers")
	})
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 4*time.Minute)
	conn := framework.Connect(t, s.PodURLs(ctx, t, s.NS, "demo"))
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	publishN(ctx, t, js, "ORDERS", 3, 50)
	conn.Close()
	claims := claimUIDs(ctx, t, s)
	if len(claims) != 3 {
		t.Fatalf("claims %v, want 3", claims)
	}

	var stopped []int
	for i := range servers {
		pod := fmt.Sprintf("demo-%d-0", i)
		pid := s.Node.ContainerPID(s.NS, pod, "nats")
		if pid <= 0 {
			t.Fatalf("no nats process for %s", pod)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("SIGSTOP %s (pid %d): %v", pod, pid, err)
		}
		stopped = append(stopped, pid)
	}
	resume := func() {
		for _, pid := range stopped {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
		stopped = nil
	}
	t.Cleanup(resume)
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, "Settled=False ServersSilent", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		return framework.CheckCondition(nc, clusterv1beta1.ConditionSettled, metav1.ConditionFalse, clusterv1beta1.ReasonServersSilent)
	})
	t.Logf("every server stopped (SIGSTOP): Settled=False ServersSilent")

	deleteCluster(ctx, t, s, "demo")
	nc := waitProgressing(ctx, t, s, s.NS, metav1.ConditionFalse, clusterv1beta1.ReasonDeleting, time.Minute)
	msg := progressingMessage(nc)
	t.Logf("held: %s", msg)
	requireContains(t, "the Deleting hold", msg, "cannot tell whether JetStream holds streams (demo-0, demo-1, demo-2 did not answer",
		"and their claims: spec.jetstream.volumeClaimTemplate.whenDeleted is Delete")
	time.Sleep(quorumHeldFor)
	nc, err = s.Cluster(ctx, s.NS, "demo")
	if err != nil {
		t.Fatalf("the NatsCluster went while its servers were silent: %v", err)
	}
	if got := claimUIDs(ctx, t, s); !equalMaps(got, claims) {
		t.Fatalf("claims changed while the deletion was held: %v, before %v", got, claims)
	}
	t.Logf("held Deleting for %s with every server silent: the NatsCluster and its 3 claims are there (%s)", quorumHeldFor, framework.Conditions(nc))

	resume()
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, "the hold to name ORDERS once the servers answer", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if m := progressingMessage(nc); !strings.Contains(m, "JetStream holds 1 stream ($G/ORDERS)") {
			return fmt.Errorf("Progressing: %s", m)
		}
		return nil
	})
	if got := claimUIDs(ctx, t, s); !equalMaps(got, claims) {
		t.Fatalf("claims changed: %v, before %v", got, claims)
	}
	t.Logf("the servers answer again: the deletion holds naming ORDERS; the claims are kept")
}
