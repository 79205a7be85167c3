package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/test/framework"
)

// Scaling the example cluster from 3 to 5 servers under a publisher on an
// R3 stream creates demo-3 and demo-4 and restarts none of demo-0..demo-2
// (their pods keep their UIDs): the cluster is Settled with 5 meta group
// members, the stream keeps its leader and replicas, and no acknowledged
// message is lost.
func TestScaleUpUnderLoadRestartsNoServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsScaleUp)
	_, js, pub := startLoadedCluster(ctx, t, s, "")
	pods := []string{"demo-0-0", "demo-1-0", "demo-2-0"}
	before := s.PodUIDs(ctx, s.NS, pods...)
	streamBefore := streamPlacement(ctx, t, js, "ORDERS")
	t.Logf("before: pods %v; ORDERS %s", before, streamBefore)

	applied := time.Now()
	patchCluster(ctx, t, s, `{"spec":{"replicas":5}}`)

	var scaling string
	poll.Eventually(t, 2*time.Minute, 100*time.Millisecond, "Progressing=True ScalingUp", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		c := conditionOf(nc, clusterv1beta1.ConditionProgressing)
		if c.Reason != clusterv1beta1.ReasonScalingUp {
			return fmt.Errorf("Progressing is %+v", c)
		}
		scaling = c.Message
		return nil
	})
	t.Logf("while scaling: Progressing=True ScalingUp: %s", scaling)

	var final *clusterv1beta1.NatsCluster
	poll.Eventually(t, 5*time.Minute, 250*time.Millisecond, "5 servers Settled and UpToDate", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if err := framework.CheckSettledUpToDate(nc); err != nil {
			return err
		}
		if len(nc.Status.Servers) != 5 {
			return fmt.Errorf("status.servers has %d entries", len(nc.Status.Servers))
		}
		final = nc
		return nil
	})
	t.Logf("from the patch to Settled and UpToDate with 5 servers: %s", time.Since(applied).Round(time.Millisecond))

	names := []string{"demo-0", "demo-1", "demo-2", "demo-3", "demo-4"}
	members := metaMembers(ctx, t, s, names, final.Status.JetStream.MetaLeader)
	slices.Sort(members)
	if !slices.Equal(members, names) {
		t.Errorf("the meta group has members %v, want %v", members, names)
	}
	after := s.PodUIDs(ctx, s.NS, pods...)
	for _, p := range pods {
		if before[p] == "" || after[p] != before[p] {
			t.Errorf("pod %s had UID %q before and %q after: it was restarted", p, before[p], after[p])
		}
	}
	if got := streamPlacement(ctx, t, js, "ORDERS"); got != streamBefore {
		t.Errorf("ORDERS was %s before and is %s after", streamBefore, got)
	}
	verifyNoLoss(ctx, t, s, pub)
}

// streamPlacement is a stream's leader and replicas, e.g. "leader demo-1,
// replicas [demo-0 demo-2]".
func streamPlacement(ctx context.Context, t *testing.T, js jetstream.JetStream, name string) string {
	t.Helper()
	var out string
	poll.Eventually(t, time.Minute, 250*time.Millisecond, "stream info of "+name, func() error {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return errors.New("no leader")
		}
		var replicas []string
		for _, r := range info.Cluster.Replicas {
			replicas = append(replicas, r.Name)
		}
		slices.Sort(replicas)
		out = fmt.Sprintf("leader %s, replicas %v", info.Cluster.Leader, replicas)
		return nil
	})
	return out
}

// metaMembers are the JetStream meta group's members as the meta leader
// reports them on its monitoring port.
func metaMembers(ctx context.Context, t *testing.T, s *framework.Stack, servers []string, leader string) []string {
	t.Helper()
	target := observe.Target{Cluster: s.NS + "/demo"}
	for _, srv := range servers {
		addr := observe.ServerAddr{Name: srv}
		if pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, srv+"-0", metav1.GetOptions{}); err == nil && kubeutil.PodReady(pod) {
			addr.Host = pod.Status.PodIP
		}
		target.Servers = append(target.Servers, addr)
	}
	o := observe.New(observe.Options{})
	defer o.Close()
	snap := o.Observe(ctx, target)
	srv, ok := snap.Server(leader)
	if !ok || !srv.Answered {
		t.Fatalf("the meta leader %s did not answer: %s", leader, snap.Verdict.Message)
	}
	return slices.Clone(srv.MetaMembers)
}
