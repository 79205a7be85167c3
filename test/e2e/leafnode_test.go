package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

var (
	nsLeafHub  = framework.SharedNamespace("leaf-hub")
	nsLeafEdge = framework.SharedNamespace("leaf-edge")
)

// A hub (3 servers, JetStream, spec.leafnodes.accept) and a leaf cluster
// in another namespace (3 servers, JetStream in its own domain "edge"):
// the leaf is given a remote referencing the hub, which its servers
// reload (status.config.appliedBy Reload, no pod restarted). Then
// LeafnodesConnected is True, every server lists a hub server in
// status.servers[].leafnodes, and messages cross both ways: published on
// the leaf, received on the hub, and the hub's reply received on the leaf.
func TestLeafClusterConnectsToAHubByReload(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	hub := framework.Shared(ctx, t, nsLeafHub)
	edge := framework.Shared(ctx, t, nsLeafEdge)
	hub.ApplyExample(ctx, t, nsLeafHub, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			o.SetName("hub")
			_ = unstructured.SetNestedField(o.Object, true, "spec", "leafnodes", "accept")
		}
	})
	edge.ApplyExample(ctx, t, nsLeafEdge, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			o.SetName("leaf")
			_ = unstructured.SetNestedField(o.Object, "edge", "spec", "jetstream", "domain")
		}
	})
	hub.WaitSettledUpToDate(ctx, t, nsLeafHub, "hub", 4*time.Minute)
	edge.WaitSettledUpToDate(ctx, t, nsLeafEdge, "leaf", 4*time.Minute)
	pods := []string{"leaf-0-0", "leaf-1-0", "leaf-2-0"}
	uids := edge.PodUIDs(ctx, nsLeafEdge, pods...)

	patch := fmt.Sprintf(`{"spec":{"leafnodes":{"remotes":[{"name":"hub","clusterRef":{"name":"hub","namespace":%q}}]}}}`, nsLeafHub)
	if _, err := edge.Nats.ClusterV1beta1().NatsClusters(nsLeafEdge).Patch(ctx, "leaf", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	added := time.Now()
	poll.Eventually(t, 3*time.Minute, 250*time.Millisecond, "LeafnodesConnected of the leaf cluster", func() error {
		nc, err := edge.Cluster(ctx, nsLeafEdge, "leaf")
		if err != nil {
			return err
		}
		p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing)
		if p == nil || p.Reason != clusterv1beta1.ReasonUpToDate || p.ObservedGeneration != nc.Generation {
			return fmt.Errorf("Progressing %+v", p)
		}
		c := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionLeafnodesConnected)
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("LeafnodesConnected %+v", c)
		}
		for _, s := range nc.Status.Servers {
			if len(s.Leafnodes) != 1 || !strings.HasPrefix(s.Leafnodes[0], "hub-") {
				return fmt.Errorf("status.servers %s has leafnodes %v", s.Name, s.Leafnodes)
			}
		}
		if cfg := nc.Status.Config; cfg == nil || cfg.AppliedBy != clusterv1beta1.AppliedByReload {
			return fmt.Errorf("status.config %+v, want appliedBy Reload", cfg)
		}
		t.Logf("LeafnodesConnected %s: %s (%s after the remote was added)", c.Reason, c.Message, time.Since(added).Round(time.Millisecond))
		return nil
	})
	for pod, uid := range edge.PodUIDs(ctx, nsLeafEdge, pods...) {
		if uids[pod] != uid {
			t.Errorf("pod %s was restarted: adding a leaf remote reloads", pod)
		}
	}

	onHub := framework.Connect(t, hub.PodURLs(ctx, t, nsLeafHub, "hub"))
	onLeaf := framework.Connect(t, edge.PodURLs(ctx, t, nsLeafEdge, "leaf"))
	if _, err := onHub.Subscribe("edge.hello", func(m *nats.Msg) { _ = m.Respond([]byte("hub says hello back to " + string(m.Data))) }); err != nil {
		t.Fatal(err)
	}
	if err := onHub.Flush(); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, time.Minute, 500*time.Millisecond, "a request from the leaf answered by the hub", func() error {
		reply, err := onLeaf.Request("edge.hello", []byte("leaf"), 2*time.Second)
		if err != nil {
			return err
		}
		if string(reply.Data) != "hub says hello back to leaf" {
			return errors.New("reply " + string(reply.Data))
		}
		t.Logf("published on the leaf, received on the hub and back: %q", reply.Data)
		return nil
	})
}
