package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// leafDomain is the JetStream domain of the leaf cluster of east.
const leafDomain = "edge"

// startLeafOfEast creates, in its own namespace, the leaf cluster edge of
// the supercluster test: 3 servers without auth, JetStream in its own
// domain "edge", connecting to east (spec.leafnodes.accept with TLS) as a
// leaf over TLS (east's routes CA) with the app user's creds file, copied
// from east's namespace into the Secret east-app-creds of edge's: on the
// hub the leaf lands in the app account.
func startLeafOfEast(ctx context.Context, t *testing.T, east, edge *framework.Stack) {
	t.Helper()
	creds, err := east.Kube.CoreV1().Secrets(nsSuperEast).Get(ctx, "demo-app-creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := edge.Kube.CoreV1().Secrets(nsSuperEdge).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "east-app-creds"},
		Data:       map[string][]byte{"user.creds": creds.Data["user.creds"]},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	edge.ApplyExample(ctx, t, nsSuperEdge, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() != "NatsCluster" {
			return
		}
		o.SetName("edge")
		_ = unstructured.SetNestedField(o.Object, leafDomain, "spec", "jetstream", "domain")
		_ = unstructured.SetNestedSlice(o.Object, []any{map[string]any{
			"name":        "east",
			"clusterRef":  map[string]any{"name": "east", "namespace": nsSuperEast},
			"tls":         map[string]any{},
			"credentials": map[string]any{"name": "east-app-creds"},
		}}, "spec", "leafnodes", "remotes")
	})
}

// checkLeafOfEast waits for the leaf cluster edge to be up to date with
// LeafnodesConnected True, every server connected to a server of east,
// then checks that a request published on the leaf is answered by a
// client of east's app account and the answer comes back, and that the
// leaf's JetStream, in its own domain, is reached from east through that
// domain: a stream made on the leaf is read from east.
func checkLeafOfEast(ctx context.Context, t *testing.T, east, edge *framework.Stack, appCreds string) {
	t.Helper()
	edge.WaitSettledUpToDate(ctx, t, nsSuperEdge, "edge", 5*time.Minute)
	poll.Eventually(t, 3*time.Minute, 250*time.Millisecond, "LeafnodesConnected True on edge", func() error {
		nc, err := edge.Cluster(ctx, nsSuperEdge, "edge")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionLeafnodesConnected)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != nc.Generation {
			return fmt.Errorf("LeafnodesConnected %+v", c)
		}
		for _, s := range nc.Status.Servers {
			if len(s.Leafnodes) != 1 || !strings.HasPrefix(s.Leafnodes[0], "east-") {
				return fmt.Errorf("status.servers %s has leafnodes %v", s.Name, s.Leafnodes)
			}
		}
		t.Logf("edge: LeafnodesConnected %s: %s", c.Reason, c.Message)
		return nil
	})
	files, err := edge.Kube.CoreV1().Secrets(nsSuperEdge).Get(ctx, "edge-leaf-credentials", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := edge.Kube.CoreV1().Secrets(nsSuperEdge).Get(ctx, "east-app-creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(files.Data["leaf-east.creds"]) != string(creds.Data["user.creds"]) {
		t.Fatalf("edge-leaf-credentials does not hold the creds file of Secret east-app-creds (keys %d)", len(files.Data))
	}

	onHub := framework.Connect(t, east.PodURLs(ctx, t, nsSuperEast, "east"), nats.UserCredentials(appCreds))
	onLeaf := framework.Connect(t, edge.PodURLs(ctx, t, nsSuperEdge, "edge"))
	checkRequestCrossesLeaf(t, onHub, onLeaf, "east", "edge")

	// The leaf's JetStream is a domain of its own: a stream made on the
	// leaf is not in east's JetStream, and east reaches it through the
	// domain.
	leafJS, err := jetstream.New(onLeaf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leafJS.CreateStream(ctx, jetstream.StreamConfig{Name: "EDGE_EVENTS", Subjects: []string{"edge.events.>"}, Replicas: 3}); err != nil {
		t.Fatalf("creating EDGE_EVENTS on the leaf: %v", err)
	}
	for i := range 10 {
		if _, err := leafJS.Publish(ctx, fmt.Sprintf("edge.events.%d", i), []byte("event")); err != nil {
			t.Fatal(err)
		}
	}
	hubJS, err := jetstream.New(onHub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hubJS.Stream(ctx, "EDGE_EVENTS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("EDGE_EVENTS looked up in east's own JetStream: %v, want stream not found", err)
	}
	viaDomain, err := jetstream.NewWithDomain(onHub, leafDomain)
	if err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, time.Minute, 500*time.Millisecond, "EDGE_EVENTS read from east through the domain "+leafDomain, func() error {
		s, err := viaDomain.Stream(ctx, "EDGE_EVENTS")
		if err != nil {
			return err
		}
		info := s.CachedInfo()
		if info.State.Msgs != 10 {
			return fmt.Errorf("EDGE_EVENTS holds %d messages, want 10", info.State.Msgs)
		}
		t.Logf("from east through JetStream domain %q: EDGE_EVENTS on the leaf holds %d messages (leader %s)", leafDomain, info.State.Msgs, info.Cluster.Leader)
		return nil
	})
}
