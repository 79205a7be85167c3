package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// setVersion returns a mutation that sets a NatsCluster's spec.version.
func setVersion(v string) func(*unstructured.Unstructured) {
	return func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			_ = unstructured.SetNestedField(o.Object, v, "spec", "version")
		}
	}
}

// settledCluster applies the example 3-server JetStream cluster to namespace
// nats (on version, or the example's own when empty; edits change it
// further, e.g. framework.ProductionLameDuck) and waits until it is Ready,
// Settled and up to date.
func settledCluster(ctx context.Context, t *testing.T, s *framework.Stack, version string, edits ...func(*unstructured.Unstructured)) *clusterv1beta1.NatsCluster {
	t.Helper()
	if version != "" {
		edits = append([]func(*unstructured.Unstructured){setVersion(version)}, edits...)
	}
	s.CreateNamespace(ctx, t, s.NS)
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		for _, e := range edits {
			e(o)
		}
	})
	return s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
}

// The idle check's rest requeue, and how long it watches.
const (
	restRequeue = 10 * time.Second
	idleWindow  = 25 * time.Second
)

// The example 3-server JetStream cluster on nats-server 2.15.1 comes up
// Ready, Settled and up to date, every server reporting the converged
// revision itself.
func TestCreateExampleCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.OwnController(ctx, t, "create", "--rest-requeue="+restRequeue.String())
	s.CreateNamespace(ctx, t, s.NS)

	start := time.Now()
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", setVersion("2.15.1"))
	nc := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
	t.Logf("Ready, Settled and UpToDate after %s: %s", time.Since(start).Round(time.Millisecond), framework.Conditions(nc))

	if nc.Status.Config == nil || nc.Status.Config.Revision == "" {
		t.Fatalf("status.config.revision not set: %+v", nc.Status.Config)
	}
	if len(nc.Status.Servers) != 3 {
		t.Fatalf("status.servers has %d entries, want 3", len(nc.Status.Servers))
	}
	revs := s.ServerRevisions(ctx, t, nc)
	for _, srv := range nc.Status.Servers {
		if srv.ConfigRevision != revs[srv.Name] || srv.Version != "2.15.1" || !srv.Ready {
			t.Errorf("server %+v, want its revision %s, version 2.15.1, ready", srv, revs[srv.Name])
		}
	}
	if nc.Status.Version != "2.15.1" || nc.Status.ReadyReplicas != 3 {
		t.Errorf("status.version %q readyReplicas %d", nc.Status.Version, nc.Status.ReadyReplicas)
	}
	if nc.Status.Rollout != nil {
		t.Errorf("status.rollout is %+v, want none once up to date", nc.Status.Rollout)
	}
	if nc.Status.JetStream == nil || nc.Status.JetStream.MetaLeader == "" {
		t.Errorf("status.jetstream.metaLeader not set: %+v", nc.Status.JetStream)
	}

	// Idle: once settled and up to date, the controller observes every
	// --rest-requeue (2 minutes by default; 10 s here, so a window of 25 s
	// sees at least two observations) and writes nothing. Its own
	// controller, so that no other test's cluster adds writes or syncs.
	time.Sleep(5 * time.Second)
	before, ok := s.Controller.Metric("nats_operator_api_writes_total")
	if !ok {
		t.Fatal("nats_operator_api_writes_total not exposed")
	}
	syncsBefore, _ := s.Controller.Metric("workqueue_adds_total", `name="natscluster"`)
	time.Sleep(idleWindow)
	after, _ := s.Controller.Metric("nats_operator_api_writes_total")
	syncsAfter, _ := s.Controller.Metric("workqueue_adds_total", `name="natscluster"`)
	t.Logf("idle %s: %v API writes (total %v), %v syncs queued", idleWindow, after-before, after, syncsAfter-syncsBefore)
	if after != before {
		t.Errorf("the controller made %v API writes in %s idle, want 0", after-before, idleWindow)
	}
	if syncsAfter-syncsBefore < 2 {
		t.Errorf("%v syncs in %s idle with --rest-requeue %s: the cluster at rest is not observed", syncsAfter-syncsBefore, idleWindow, restRequeue)
	}
}
