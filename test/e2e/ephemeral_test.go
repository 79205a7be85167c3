package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// streamState returns where a stream's leader is and how many messages it
// holds.
func streamState(ctx context.Context, js jetstream.JetStream, name string) (leader string, msgs uint64, err error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return "", 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return "", 0, err
	}
	if info.Cluster != nil {
		leader = info.Cluster.Leader
	}
	return leader, info.State.Msgs, nil
}

// On a cluster without volumes (an emptyDir store), a version change holds
// with DataLossOnRestart before restarting the server holding the only copy
// of an R1 stream, names it, and restarts nothing there; once the stream is
// raised to R3 the rollout completes with every message kept. A second
// version change with only R3 streams rolls without a hold.
func TestEphemeralStoreHoldsBeforeDestroyingTheOnlyCopy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsEphemeral)
	s.CreateNamespace(ctx, t, s.NS)
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		unstructured.RemoveNestedField(o.Object, "spec", "jetstream", "volumeClaimTemplate")
	})
	nc := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
	if nc.Status.JetStream == nil || nc.Status.JetStream.Store != clusterv1beta1.StoreEphemeral {
		t.Fatalf("status.jetstream = %+v, want store Ephemeral", nc.Status.JetStream)
	}
	t.Logf("status.jetstream.store: %s", nc.Status.JetStream.Store)

	conn := framework.Connect(t, s.PodURLs(ctx, t, s.NS, "demo"))
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	publishN(ctx, t, js, "ONE", 1, 100)
	publishN(ctx, t, js, "THREE", 3, 100)
	holder, msgs, err := streamState(ctx, js, "ONE")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before: stream ONE (R1) on %s holds %d messages; THREE (R3) holds 100", holder, msgs)
	holderPod := holder + "-0"

	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.1"}}`)
	var held *clusterv1beta1.NatsCluster
	poll.Eventually(t, 3*time.Minute, 250*time.Millisecond, "Progressing=False DataLossOnRestart", func() error {
		c, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		held = c
		return framework.CheckCondition(c, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, clusterv1beta1.ReasonDataLossOnRestart)
	})
	msg := conditionOf(held, clusterv1beta1.ConditionProgressing).Message
	t.Logf("held: %s", msg)
	for _, want := range []string{"restarting " + holder, "ONE in the global account", "volumeClaimTemplate", "force-step=" + holder} {
		if !strings.Contains(msg, want) {
			t.Errorf("the hold message does not say %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "THREE") {
		t.Errorf("the hold names the R3 stream THREE: %s", msg)
	}
	uid := s.PodUIDs(ctx, s.NS, holderPod)[holderPod]
	sts, err := s.Kube.AppsV1().StatefulSets(s.NS).Get(ctx, holder, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	heldRevision := sts.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision]
	events, err := s.Events(ctx, s.NS, "demo", clusterv1beta1.ReasonDataLossOnRestart)
	if err != nil || len(events) == 0 {
		t.Errorf("no DataLossOnRestart Event (%v)", err)
	}

	time.Sleep(heldFor)
	if now := s.PodUIDs(ctx, s.NS, holderPod)[holderPod]; now != uid {
		t.Fatalf("pod %s was restarted while held (uid %s -> %s)", holderPod, uid, now)
	}
	sts, err = s.Kube.AppsV1().StatefulSets(s.NS).Get(ctx, holder, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sts.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision]; got != heldRevision {
		t.Fatalf("StatefulSet %s moved to revision %s while held", holder, got)
	}
	if _, n, err := streamState(ctx, js, "ONE"); err != nil || n != 100 {
		t.Fatalf("ONE holds %d messages after 60 s held (%v), want 100", n, err)
	}
	t.Logf("held DataLossOnRestart for 60 s: %s not restarted, ONE still holds 100 messages", holderPod)

	// The way out that keeps the data: raise ONE to three replicas.
	framework.CreateStream(ctx, t, js, "ONE", 3)
	released := time.Now()
	nc = s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 4*time.Minute)
	t.Logf("ONE raised to R3: rollout done %s later: %s", time.Since(released).Round(time.Millisecond), framework.Conditions(nc))
	for _, name := range []string{"ONE", "THREE"} {
		poll.Eventually(t, time.Minute, 500*time.Millisecond, name+" holds 100 messages", func() error {
			_, n, err := streamState(ctx, js, name)
			if err != nil {
				return err
			}
			if n != 100 {
				return fmt.Errorf("%d messages", n)
			}
			return nil
		})
	}
	t.Logf("after: ONE and THREE hold 100 messages each, lost 0")

	// Every stream is R3 now: the next version change rolls without a hold.
	tracker, err := s.StartTracker(ctx, s.NS, "demo", servers, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.2"}}`)
	sawHold := false
	poll.Eventually(t, 4*time.Minute, 250*time.Millisecond, "the R3-only rollout to finish", func() error {
		c, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if framework.CheckCondition(c, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, clusterv1beta1.ReasonDataLossOnRestart) == nil {
			sawHold = true
		}
		if c.Status.Version != "2.15.2" {
			return errors.New("status.version " + c.Status.Version)
		}
		return framework.CheckCondition(c, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, clusterv1beta1.ReasonUpToDate)
	})
	tracker.Stop()
	if sawHold {
		t.Errorf("an R3-only rollout was held with DataLossOnRestart")
	}
	t.Logf("R3-only rollout: restart order %v, no hold", tracker.RestartOrder())
	for _, name := range []string{"ONE", "THREE"} {
		poll.Eventually(t, time.Minute, 500*time.Millisecond, name+" holds 100 messages", func() error {
			_, n, err := streamState(ctx, js, name)
			if err != nil {
				return err
			}
			if n != 100 {
				return fmt.Errorf("%d messages", n)
			}
			return nil
		})
	}
	t.Logf("after the R3-only rollout: ONE and THREE hold 100 messages each, lost 0")
}
