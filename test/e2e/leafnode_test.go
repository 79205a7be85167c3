package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
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

// A hub in operator mode (natscluster-auth.yaml: 3 servers, JetStream,
// the app account, spec.leafnodes.accept with TLS) and a leaf cluster in
// another namespace (3 servers, no auth, JetStream in its own domain
// "edge"). The leaf is given a remote referencing the hub, over TLS (the
// hub's routes CA copied into leaf-leaf-credentials, the hub's certificate
// verified against it), without credentials: the hub refuses the
// connections, and LeafnodesConnected is False. Then the
// remote gets the app user's creds file from a Secret of the leaf's
// namespace. Both changes are reloads (status.config.appliedBy Reload, no
// pod restarted). Then LeafnodesConnected is True, every server lists a hub
// server in status.servers[].leafnodes, and messages cross both ways:
// published on the leaf (its global account), received on the hub by a
// client of the app account, and its reply received on the leaf.
func TestLeafClusterConnectsToAHubByReload(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	hub := framework.Shared(ctx, t, nsLeafHub)
	edge := framework.Shared(ctx, t, nsLeafEdge)
	hub.ApplyExample(ctx, t, nsLeafHub, "natscluster-auth.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			o.SetName("hub")
			// The leaf cluster of nsLeafEdge names it by clusterRef.
			o.SetAnnotations(map[string]string{clusterv1beta1.AnnotationAllowReferencesFrom: nsLeafEdge})
			_ = unstructured.SetNestedField(o.Object, true, "spec", "leafnodes", "accept")
			_ = unstructured.SetNestedMap(o.Object, map[string]any{}, "spec", "leafnodes", "tls")
		}
	})
	edge.ApplyExample(ctx, t, nsLeafEdge, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			o.SetName("leaf")
			_ = unstructured.SetNestedField(o.Object, "edge", "spec", "jetstream", "domain")
		}
	})
	if nc := hub.WaitSettledUpToDate(ctx, t, nsLeafHub, "hub", 4*time.Minute); nc.Spec.LeafNodes == nil || nc.Spec.LeafNodes.TLS == nil {
		t.Fatalf("the hub has no spec.leafnodes.tls: %+v", nc.Spec.LeafNodes)
	}
	edge.WaitSettledUpToDate(ctx, t, nsLeafEdge, "leaf", 4*time.Minute)
	pods := []string{"leaf-0-0", "leaf-1-0", "leaf-2-0"}
	uids := edge.PodUIDs(ctx, nsLeafEdge, pods...)

	remote := func(credentials string) {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"leafnodes":{"remotes":[{"name":"hub","clusterRef":{"name":"hub","namespace":%q},"tls":{}%s}]}}}`, nsLeafHub, credentials)
		if _, err := edge.Nats.ClusterV1beta1().NatsClusters(nsLeafEdge).Patch(ctx, "leaf", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// leafnodes waits for the leaf cluster's spec to be applied by reload
	// and LeafnodesConnected to have status want.
	leafnodes := func(want metav1.ConditionStatus, since time.Time) {
		t.Helper()
		poll.Eventually(t, 3*time.Minute, 250*time.Millisecond, "LeafnodesConnected "+string(want)+" on the leaf cluster", func() error {
			nc, err := edge.Cluster(ctx, nsLeafEdge, "leaf")
			if err != nil {
				return err
			}
			p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing)
			if p == nil || p.Reason != clusterv1beta1.ReasonUpToDate || p.ObservedGeneration != nc.Generation {
				return fmt.Errorf("Progressing %+v", p)
			}
			if cfg := nc.Status.Config; cfg == nil || cfg.AppliedBy != clusterv1beta1.AppliedByReload {
				return fmt.Errorf("status.config %+v, want appliedBy Reload", cfg)
			}
			c := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionLeafnodesConnected)
			if c == nil || c.Status != want || c.ObservedGeneration != nc.Generation {
				return fmt.Errorf("LeafnodesConnected %+v", c)
			}
			for _, s := range nc.Status.Servers {
				connected := len(s.Leafnodes) == 1 && strings.HasPrefix(s.Leafnodes[0], "hub-")
				if connected != (want == metav1.ConditionTrue) {
					return fmt.Errorf("status.servers %s has leafnodes %v", s.Name, s.Leafnodes)
				}
			}
			t.Logf("LeafnodesConnected %s %s: %s (%s after the change)", c.Status, c.Reason, c.Message, time.Since(since).Round(time.Millisecond))
			return nil
		})
	}

	// Without credentials the hub, in operator mode, refuses the leaf.
	remote("")
	leafnodes(metav1.ConditionFalse, time.Now())

	creds, err := hub.Kube.CoreV1().Secrets(nsLeafHub).Get(ctx, "demo-app-creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := edge.Kube.CoreV1().Secrets(nsLeafEdge).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hub-app-creds"},
		Data:       map[string][]byte{"user.creds": creds.Data["user.creds"]},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	remote(`,"credentials":{"name":"hub-app-creds"}`)
	leafnodes(metav1.ConditionTrue, time.Now())
	files, err := edge.Kube.CoreV1().Secrets(nsLeafEdge).Get(ctx, "leaf-leaf-credentials", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hubCA, err := hub.Kube.CoreV1().Secrets(nsLeafHub).Get(ctx, "hub-routes-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(files.Data["leaf-hub.ca.crt"]) != string(hubCA.Data["ca.crt"]) || string(files.Data["leaf-hub.creds"]) != string(creds.Data["user.creds"]) {
		t.Fatalf("leaf-leaf-credentials holds %d keys, not the hub's routes CA and the app creds", len(files.Data))
	}
	t.Logf("leaf-leaf-credentials: the hub's routes CA (leaf-hub.ca.crt) and the app user's creds (leaf-hub.creds)")
	for pod, uid := range edge.PodUIDs(ctx, nsLeafEdge, pods...) {
		if uids[pod] != uid {
			t.Errorf("pod %s was restarted: adding a leaf remote reloads", pod)
		}
	}

	onHub := framework.Connect(t, hub.PodURLs(ctx, t, nsLeafHub, "hub"), nats.UserCredentials(hub.CredsFile(ctx, t, nsLeafHub, "demo-app-creds")))
	onLeaf := framework.Connect(t, edge.PodURLs(ctx, t, nsLeafEdge, "leaf"))
	checkRequestCrossesLeaf(t, onHub, onLeaf, "hub", "leaf")
}

// checkRequestCrossesLeaf checks a request published on the leaf (a
// client of it, onLeaf) is received on the hub (a subscriber of onHub) and
// its reply comes back.
func checkRequestCrossesLeaf(t *testing.T, onHub, onLeaf *nats.Conn, hub, leaf string) {
	t.Helper()
	if _, err := onHub.Subscribe("edge.hello", func(m *nats.Msg) { _ = m.Respond([]byte(hub + " says hello back to " + string(m.Data))) }); err != nil {
		t.Fatal(err)
	}
	if err := onHub.Flush(); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, time.Minute, 500*time.Millisecond, "a request from the leaf answered on "+hub, func() error {
		reply, err := onLeaf.Request("edge.hello", []byte(leaf), 2*time.Second)
		if err != nil {
			return err
		}
		if want := hub + " says hello back to " + leaf; string(reply.Data) != want {
			return errors.New("reply " + string(reply.Data))
		}
		t.Logf("published on the leaf %s, received on %s and back: %q", leaf, hub, reply.Data)
		return nil
	})
}
