package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

var nsSolo = framework.SharedNamespace("solo")

// One server with JetStream (replicas: 1, rendered standalone) becomes
// Ready and Settled, takes a stream, and a version change restarts its one
// server with the stream kept. Scaling it to three under a publisher is held
// with StandaloneChangeBlocked (nats-server would delete the standalone
// server's streams as orphans once the cluster forms: the matrix's
// TestStandaloneServerJoiningACluster): the server is not restarted and
// every acknowledged message is in the stream.
func TestASingleJetStreamServer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsSolo)
	s.ApplyExample(ctx, t, nsSolo, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			_ = unstructured.SetNestedField(o.Object, int64(1), "spec", "replicas")
			_ = unstructured.SetNestedField(o.Object, "2.15.1", "spec", "version")
		}
	})
	s.WaitSettledUpToDate(ctx, t, nsSolo, "demo", 4*time.Minute)
	urls := s.PodURLs(ctx, t, nsSolo, "demo")
	conn := framework.Connect(t, urls)
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateStream(ctx, t, js, "ORDERS", 1)
	for i := range 500 {
		if _, err := js.Publish(ctx, fmt.Sprintf("ORDERS.%d", i), []byte("order")); err != nil {
			t.Fatal(err)
		}
	}
	messages := func() uint64 {
		t.Helper()
		st, err := js.Stream(ctx, "ORDERS")
		if err != nil {
			t.Fatalf("ORDERS: %v", err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}

	before := s.PodUIDs(ctx, nsSolo, "demo-0-0")
	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.2"}}`)
	nc := s.WaitSettledUpToDate(ctx, t, nsSolo, "demo", 4*time.Minute)
	if nc.Status.Version != "2.15.2" {
		t.Errorf("status.version %s, want 2.15.2", nc.Status.Version)
	}
	if after := s.PodUIDs(ctx, nsSolo, "demo-0-0"); after["demo-0-0"] == before["demo-0-0"] {
		t.Errorf("demo-0-0 was not restarted for the version change")
	}
	if n := messages(); n != 500 {
		t.Fatalf("ORDERS has %d messages after the version change, want 500", n)
	}
	t.Logf("the one server restarted onto 2.15.2; ORDERS kept its 500 messages")

	// 1 -> 3 under a publisher: held, nothing restarted, nothing lost.
	pub := framework.StartPublisher(ctx, js, "ORDERS.live")
	time.Sleep(2 * time.Second)
	before = s.PodUIDs(ctx, nsSolo, "demo-0-0")
	patchCluster(ctx, t, s, `{"spec":{"replicas":3}}`)
	nc = waitProgressing(ctx, t, s, nsSolo, metav1.ConditionFalse, clusterv1beta1.ReasonStandaloneChangeBlocked, 2*time.Minute)
	msg := progressingMessage(nc)
	t.Logf("held: %s", msg)
	requireContains(t, "the hold", msg, "standalone", "orphans", clusterv1beta1.AnnotationRestartAll)
	time.Sleep(5 * time.Second)
	acked := pub.Stop()
	_, attempts, failures, lastErr := pub.Stats()
	if after := s.PodUIDs(ctx, nsSolo, "demo-0-0"); after["demo-0-0"] != before["demo-0-0"] {
		t.Errorf("demo-0-0 was restarted during the hold")
	}
	// Every acknowledged message is there; an attempt cut short by the
	// publisher's stop may have landed too.
	if n := messages(); n < 500+uint64(len(acked)) || n > 500+uint64(attempts) {
		t.Errorf("ORDERS has %d messages, want 500 + %d acknowledged (+ at most %d unacknowledged attempts)", n, len(acked), attempts-len(acked))
	}
	t.Logf("publisher: %d acknowledged of %d attempts (%d failed, last error %v), 0 lost", len(acked), attempts, failures, lastErr)
}
