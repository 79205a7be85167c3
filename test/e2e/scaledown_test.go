package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// Scaling the example cluster from 5 to 3 servers under publishers on an R3
// stream and an R1 stream placed on a leaving server: while an R5 stream
// exists the scale-down is held with ScaleDownBlocked naming it and nothing
// is touched for 60 s; once it is edited to R3 the scale-down removes demo-4
// then demo-3 (evacuate, stop, remove the JetStream peer, delete the
// objects), the meta group lists 3 peers, no remaining server restarted,
// and every acknowledged message of both streams is readable.
func TestScaleDownMovesEveryReplicaAndRemovesTheServers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsScaleDown)
	conn, js := fiveServers(ctx, t, s)
	framework.CreateStream(ctx, t, js, "WIDE", 5)
	one := createStreamOn(ctx, t, conn, js, "ONE", []string{"demo-3", "demo-4"})
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
	pods := []string{"demo-0-0", "demo-1-0", "demo-2-0", "demo-3-0", "demo-4-0"}
	before := s.PodUIDs(ctx, s.NS, pods...)

	patchCluster(ctx, t, s, `{"spec":{"replicas":3}}`)
	var held string
	poll.Eventually(t, time.Minute, 250*time.Millisecond, "ScaleDownBlocked", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		c := conditionOf(nc, clusterv1beta1.ConditionProgressing)
		if c.Reason != clusterv1beta1.ReasonScaleDownBlocked {
			return fmt.Errorf("Progressing %s: %s", c.Reason, c.Message)
		}
		held = c.Message
		return nil
	})
	t.Logf("held: %s", held)
	if !strings.Contains(held, "$G/WIDE (5 replicas)") {
		t.Errorf("the hold does not name $G/WIDE: %s", held)
	}
	time.Sleep(heldFor)
	if got := s.PodUIDs(ctx, s.NS, pods...); !equalMaps(got, before) {
		t.Fatalf("pods changed while the scale-down was held: %v, before %v", got, before)
	}
	for _, n := range []string{"demo-3", "demo-4"} {
		sts, err := s.Kube.AppsV1().StatefulSets(s.NS).Get(ctx, n, metav1.GetOptions{})
		if err != nil || sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
			t.Fatalf("StatefulSet %s touched while held: %v", n, err)
		}
	}
	t.Log("held for 60 s: no pod, StatefulSet or stream touched")

	if _, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: "WIDE", Subjects: []string{"WIDE.>"}, Replicas: 3, Storage: jetstream.FileStorage,
		Duplicates: 10 * time.Minute}); err != nil {
		t.Fatalf("editing WIDE to 3 replicas: %v", err)
	}
	released := time.Now()
	var phases []string
	gone := map[string]time.Duration{}
	poll.Eventually(t, 5*time.Minute, 250*time.Millisecond, "demo-4 and demo-3 removed, 3 servers Settled and UpToDate", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		for _, r := range nc.Status.Removals {
			if p := r.Server + " " + string(r.Phase); !slices.Contains(phases, p) {
				phases = append(phases, p)
			}
		}
		for _, n := range []string{"demo-4", "demo-3"} {
			if _, ok := gone[n]; ok {
				continue
			}
			if _, err := s.Kube.AppsV1().StatefulSets(s.NS).Get(ctx, n, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				gone[n] = time.Since(released)
			}
		}
		if len(gone) < 2 {
			return fmt.Errorf("removed so far %v; removals %+v; %s", gone, nc.Status.Removals, framework.Conditions(nc))
		}
		return framework.CheckSettledUpToDate(nc)
	})
	t.Logf("phases seen in status.removals: %v", phases)
	t.Logf("StatefulSet gone after the hold was released: demo-4 %s, demo-3 %s", gone["demo-4"].Round(time.Millisecond), gone["demo-3"].Round(time.Millisecond))

	final, _ := s.Cluster(ctx, s.NS, "demo")
	members := metaMembers(ctx, t, s, []string{"demo-0", "demo-1", "demo-2"}, final.Status.JetStream.MetaLeader)
	slices.Sort(members)
	if !slices.Equal(members, []string{"demo-0", "demo-1", "demo-2"}) {
		t.Errorf("the meta group lists %v, want demo-0, demo-1, demo-2", members)
	}
	for _, n := range []string{"demo-3", "demo-4"} {
		// The claim goes once kube-controller-manager's pvc-protection
		// controller has seen that no pod uses it.
		poll.Eventually(t, time.Minute, 250*time.Millisecond, "the claim of "+n+" deleted", func() error {
			if _, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, "data-"+n+"-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
		if _, err := s.Kube.CoreV1().ConfigMaps(s.NS).Get(ctx, n+"-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the ConfigMap of %s is still there (%v)", n, err)
		}
	}
	after := s.PodUIDs(ctx, s.NS, pods[:3]...)
	for _, p := range pods[:3] {
		if after[p] != before[p] {
			t.Errorf("pod %s restarted during the scale-down", p)
		}
	}
	if where := streamPlacement(ctx, t, js, "ONE"); strings.Contains(where, "demo-3") || strings.Contains(where, "demo-4") {
		t.Errorf("ONE is still on a removed server: %s", where)
	} else {
		t.Logf("ONE moved: %s", where)
	}
	verifyNoLossOf(ctx, t, s, "ORDERS", orders)
	verifyNoLossOf(ctx, t, s, "ONE", ones)
}

// fiveServers brings up the example cluster with 5 servers and an R3 stream
// ORDERS, and returns a client of it.
func fiveServers(ctx context.Context, t *testing.T, s *framework.Stack) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return clusterOf(ctx, t, s, 5, nil)
}

// clusterOf brings up the example cluster with n servers (edit changes the
// NatsCluster further) and an R3 stream ORDERS, and returns a client of it.
func clusterOf(ctx context.Context, t *testing.T, s *framework.Stack, n int64, edit func(*unstructured.Unstructured)) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	s.CreateNamespace(ctx, t, s.NS)
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			_ = unstructured.SetNestedField(o.Object, n, "spec", "replicas")
			if edit != nil {
				edit(o)
			}
		}
	})
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 4*time.Minute)
	conn := framework.Connect(t, s.PodURLs(ctx, t, s.NS, "demo"))
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateStream(ctx, t, js, "ORDERS", 3)
	return conn, js
}

// createStreamOn makes an R1 stream on one of the servers, and returns
// where it is. nats-server seldom places a new R1 stream on a given server,
// so the stream is created R3 until one of its replicas is there, its
// leadership moved there, then scaled to R1, which keeps the leader.
func createStreamOn(ctx context.Context, t *testing.T, conn *nats.Conn, js jetstream.JetStream, name string, servers []string) string {
	t.Helper()
	cfg := jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: 3, Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute}
	// Each info request has a deadline of its own and is asked again: a
	// STREAM.INFO right after a leader stepdown was once never answered,
	// and with the test's context alone the test waited 20 minutes (CI).
	info := func() *jetstream.StreamInfo {
		t.Helper()
		var i *jetstream.StreamInfo
		poll.Eventually(t, time.Minute, 250*time.Millisecond, "the info of stream "+name, func() error {
			ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			st, err := js.Stream(ictx, name)
			if err != nil {
				return err
			}
			i = st.CachedInfo()
			return nil
		})
		return i
	}
	for range 20 {
		framework.CreateStream(ctx, t, js, name, 3)
		i := info()
		target := ""
		if i.Cluster != nil && slices.Contains(servers, i.Cluster.Leader) {
			target = i.Cluster.Leader
		} else if i.Cluster != nil {
			for _, r := range i.Cluster.Replicas {
				if slices.Contains(servers, r.Name) {
					target = r.Name
				}
			}
		}
		if target == "" {
			if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Fatal(err)
			}
			continue
		}
		poll.Eventually(t, 30*time.Second, 250*time.Millisecond, name+" led by "+target, func() error {
			if i := info(); i.Cluster != nil && i.Cluster.Leader == target {
				return nil
			}
			_, err := conn.Request("$JS.API.STREAM.LEADER.STEPDOWN."+name, []byte(`{"placement":{"preferred":"`+target+`"}}`), 2*time.Second)
			return fmt.Errorf("not yet led by %s (%v)", target, err)
		})
		cfg.Replicas = 1
		// Each update too: asked again until the stream is R1.
		poll.Eventually(t, time.Minute, 250*time.Millisecond, name+" R1 on "+target, func() error {
			if i := info(); i.Cluster != nil && i.Cluster.Leader == target && len(i.Cluster.Replicas) == 0 && i.Config.Replicas == 1 {
				return nil
			}
			uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if _, err := js.UpdateStream(uctx, cfg); err != nil {
				return fmt.Errorf("scaling %s to R1: %w", name, err)
			}
			return fmt.Errorf("%s asked to scale to R1", name)
		})
		return target
	}
	t.Fatalf("stream %s never had a replica on %v", name, servers)
	return ""
}

// heldFor is how long an e2e test watches a hold touch nothing: a few syncs
// (events sync at once, a held cluster every 30 s). That a held sync
// writes nothing, however often it runs, is proven in pkg/controller
// (TestSyncWritesNothingWhenNothingDiffers, TestSyncEmitsAnEventPerHoldTransitionOnly)
// and that the hold is decided again from the cluster alone in pkg/rollout.
const heldFor = 12 * time.Second

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The controller SIGKILLed at four points of a removal (5 -> 4 servers) —
// after it asked for the evacuation, right after it scaled demo-4's
// StatefulSet to 0, once demo-4's pod is gone, and after it asked for the
// peer removal — and restarted each time completes the removal once: demo-4
// is gone, the meta group lists demo-0..demo-3, no other server was touched,
// and no acknowledged message is lost.
func TestControllerKilledInEachRemovalPhase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.OwnController(ctx, t, "removal-phases")
	conn, js := fiveServers(ctx, t, s)
	one := createStreamOn(ctx, t, conn, js, "ONE", []string{"demo-4"})
	t.Logf("R1 stream ONE is on %s", one)
	orders := framework.StartPublisher(ctx, js, "ORDERS.new")
	ones := framework.StartPublisher(ctx, js, "ONE.new")
	stay := []string{"demo-0-0", "demo-1-0", "demo-2-0", "demo-3-0"}
	before := s.PodUIDs(ctx, s.NS, stay...)

	patchCluster(ctx, t, s, `{"spec":{"replicas":4}}`)
	removal := func() string {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil || len(nc.Status.Removals) == 0 {
			return ""
		}
		return string(nc.Status.Removals[0].Phase)
	}
	stsReplicas := func() int32 {
		sts, err := s.Kube.AppsV1().StatefulSets(s.NS).Get(ctx, "demo-4", metav1.GetOptions{})
		if err != nil || sts.Spec.Replicas == nil {
			return -1
		}
		return *sts.Spec.Replicas
	}
	podGone := func() bool {
		_, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, "demo-4-0", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	for _, point := range []struct {
		what string
		at   func() bool
	}{
		{"after asking for the evacuation", func() bool { return removal() == string(clusterv1beta1.RemovalEvacuating) }},
		{"right after scaling demo-4 to 0", func() bool { return stsReplicas() == 0 }},
		{"once demo-4's pod is gone", podGone},
		{"after asking for the peer removal", func() bool {
			return removal() == string(clusterv1beta1.RemovalRemovingPeer) || stsReplicas() == -1
		}},
	} {
		poll.Eventually(t, 3*time.Minute, 20*time.Millisecond, "the controller "+point.what, func() error {
			if point.at() {
				return nil
			}
			return fmt.Errorf("removal phase %q, demo-4 replicas %d", removal(), stsReplicas())
		})
		s.Controller.Kill()
		t.Logf("killed the controller %s (status.removals phase %q)", point.what, removal())
		time.Sleep(2 * time.Second)
		s.Controller.Start()
	}
	poll.Eventually(t, 5*time.Minute, 250*time.Millisecond, "demo-4 removed, 4 servers Settled and UpToDate", func() error {
		if _, err := s.Kube.AppsV1().StatefulSets(s.NS).Get(ctx, "demo-4", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("demo-4 StatefulSet still there (%v)", err)
		}
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		return framework.CheckSettledUpToDate(nc)
	})
	final, _ := s.Cluster(ctx, s.NS, "demo")
	names := []string{"demo-0", "demo-1", "demo-2", "demo-3"}
	members := metaMembers(ctx, t, s, names, final.Status.JetStream.MetaLeader)
	slices.Sort(members)
	if !slices.Equal(members, names) {
		t.Errorf("the meta group lists %v, want %v", members, names)
	}
	if got := s.PodUIDs(ctx, s.NS, stay...); !equalMaps(got, before) {
		t.Errorf("a remaining server was touched: pods %v, before %v", got, before)
	}
	if ev, err := s.Events(ctx, s.NS, "demo", clusterv1beta1.EventServerRemoval); err == nil {
		for _, e := range ev {
			if !strings.Contains(e.Message, "demo-4") {
				t.Errorf("a removal Event about another server: %s", e.Message)
			}
		}
	}
	verifyNoLossOf(ctx, t, s, "ORDERS", orders)
	verifyNoLossOf(ctx, t, s, "ONE", ones)
}
