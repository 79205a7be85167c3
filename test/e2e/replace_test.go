package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// Replacing demo-1 of the 3-server example cluster (annotation
// replace-server) under publishers on an R3 stream ORDERS and an R1 stream
// ONE that lives on demo-1. ONE must move off demo-1 first, but on 3
// servers $JS.API.SERVER.EVACUATE would also take demo-1's copy of ORDERS
// for good (measured in pkg/rollout/matrix/replace_matrix_test.go), so the
// replacement is held with ReplaceBlocked naming both, and nothing is
// touched. Once ONE is raised to R3 as the hold says, demo-1 is stopped,
// its claim and StatefulSet deleted and created again, and the annotation
// is cleared once the new, empty demo-1 has rejoined and caught up:
// demo-1's claim is a new one, the other servers never restarted, both
// streams have 3 current copies again, demo-1's among them, and every
// acknowledged message of both streams is readable.
func TestReplaceServerUnderLoad(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsReplace)
	conn, js := clusterOf(ctx, t, s, 3, nil)
	one := createStreamOn(ctx, t, conn, js, "ONE", []string{"demo-1"})
	t.Logf("R1 stream ONE is on %s", one)
	orders := framework.StartPublisher(ctx, js, "ORDERS.new")
	ones := framework.StartPublisher(ctx, js, "ONE.new")
	poll.Eventually(t, time.Minute, 100*time.Millisecond, "both publishers acknowledged", func() error {
		a, _, _, _ := orders.Stats()
		b, _, _, _ := ones.Stats()
		if a < 100 || b < 100 {
			return fmt.Errorf("%d and %d acknowledged", a, b)
		}
		return nil
	})
	claimUID := func() string {
		c, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, "data-demo-1-0", metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return string(c.UID)
	}
	oldClaim := claimUID()
	stay := []string{"demo-0-0", "demo-2-0"}
	before := s.PodUIDs(ctx, s.NS, stay...)

	patchCluster(ctx, t, s, `{"metadata":{"annotations":{"`+clusterv1beta1.AnnotationReplaceServer+`":"demo-1"}}}`)
	var held string
	poll.Eventually(t, time.Minute, 250*time.Millisecond, "ReplaceBlocked", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		c := conditionOf(nc, clusterv1beta1.ConditionProgressing)
		if c.Reason != clusterv1beta1.ReasonReplaceBlocked {
			return fmt.Errorf("Progressing %s: %s", c.Reason, c.Message)
		}
		held = c.Message
		return nil
	})
	t.Logf("held: %s", held)
	requireContains(t, "the hold", held, "$G/ONE", "$G/ORDERS", "--replicas 3")
	time.Sleep(heldFor)
	if got := s.PodUIDs(ctx, s.NS, append(slices.Clone(stay), "demo-1-0")...); got["demo-1-0"] == "" || claimUID() != oldClaim {
		t.Fatalf("demo-1 touched while the replacement was held: pods %v", got)
	}

	start := time.Now()
	if _, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: "ONE", Subjects: []string{"ONE.>"}, Replicas: 3, Storage: jetstream.FileStorage,
		Duplicates: 10 * time.Minute}); err != nil {
		t.Fatalf("raising ONE to 3 replicas: %v", err)
	}
	var phases []string
	poll.Eventually(t, 8*time.Minute, 250*time.Millisecond, "demo-1 replaced: annotation cleared, Settled and UpToDate", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		for _, r := range nc.Status.Removals {
			if p := r.Server + " " + string(r.Phase); !slices.Contains(phases, p) {
				phases = append(phases, p)
			}
		}
		if _, ok := nc.Annotations[clusterv1beta1.AnnotationReplaceServer]; ok {
			return fmt.Errorf("annotation still set; removals %+v; %s", nc.Status.Removals, framework.Conditions(nc))
		}
		return framework.CheckSettledUpToDate(nc)
	})
	took := time.Since(start)
	t.Logf("phases seen in status.removals: %v", phases)
	t.Logf("demo-1 replaced, rejoined and caught up in %s", took.Round(time.Millisecond))
	for _, want := range []string{"demo-1 Stopping", "demo-1 Rejoining"} {
		if !slices.Contains(phases, want) {
			t.Errorf("status.removals never showed %q (saw %v)", want, phases)
		}
	}
	nc, _ := s.Cluster(ctx, s.NS, "demo")
	if _, ok := nc.Annotations[clusterv1beta1.AnnotationReplaceRejoining]; ok {
		t.Errorf("the controller's mark %s was not cleared", clusterv1beta1.AnnotationReplaceRejoining)
	}
	if now := claimUID(); now == "" || now == oldClaim {
		t.Errorf("demo-1's claim is %q, want a new one (was %s)", now, oldClaim)
	}
	if after := s.PodUIDs(ctx, s.NS, stay...); !equalMaps(after, before) {
		t.Errorf("demo-0 or demo-2 restarted during the replacement: %v, before %v", after, before)
	}
	members := metaMembers(ctx, t, s, []string{"demo-0", "demo-1", "demo-2"}, nc.Status.JetStream.MetaLeader)
	slices.Sort(members)
	if !slices.Equal(members, []string{"demo-0", "demo-1", "demo-2"}) {
		t.Errorf("the meta group lists %v, want demo-0, demo-1, demo-2", members)
	}
	for _, stream := range []string{"ORDERS", "ONE"} {
		poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, stream+" has 3 current copies, demo-1's among them", func() error {
			st, err := js.Stream(ctx, stream)
			if err != nil {
				return err
			}
			info, err := st.Info(ctx)
			if err != nil {
				return err
			}
			return threeCurrent(info, "demo-1")
		})
	}
	t.Logf("ORDERS: %s; ONE: %s", streamPlacement(ctx, t, js, "ORDERS"), streamPlacement(ctx, t, js, "ONE"))
	verifyNoLossOf(ctx, t, s, "ORDERS", orders)
	verifyNoLossOf(ctx, t, s, "ONE", ones)
}

// threeCurrent is nil when the stream has a leader and two current
// replicas, one of them (or the leader) on server.
func threeCurrent(info *jetstream.StreamInfo, server string) error {
	c := info.Cluster
	if c == nil || c.Leader == "" || len(c.Replicas) != 2 {
		return fmt.Errorf("cluster %+v", c)
	}
	on := c.Leader == server
	for _, r := range c.Replicas {
		if !r.Current || r.Offline {
			return fmt.Errorf("replica %s not current", r.Name)
		}
		on = on || r.Name == server
	}
	if !on {
		return fmt.Errorf("no copy on %s: leader %s, replicas %+v", server, c.Leader, c.Replicas)
	}
	return nil
}
