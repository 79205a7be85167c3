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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/controller"
	"github.com/nats-operator/nats-operator/test/framework"
)

var (
	nsSuperEast = framework.SharedNamespace("supercluster-east")
	nsSuperWest = framework.SharedNamespace("supercluster-west")
	nsSuperEdge = framework.SharedNamespace("supercluster-edge")
)

// superclusterMember edits the example cluster with auth
// (natscluster-auth.yaml: operator mode, the app account; every cluster
// of the supercluster trusts the same NATS operator and system account)
// into the NatsCluster name with a gateway to the NatsCluster remote of
// namespace remoteNS, on version, with gateway TLS (the routes' generated
// certificate, the remote's routes CA in the bundle): west says tls: {},
// east says nothing more of its gateway than its remote (TLS is the
// default), and, with
// acceptLeaves, accepting leaf connections over TLS. It allows references
// from the remote's namespace (and, accepting leaves, from the leaf
// cluster's, nsSuperEdge): a clusterRef from another namespace needs it.
func superclusterMember(name, version, remote, remoteNS string, acceptLeaves bool) func(*unstructured.Unstructured) {
	return func(o *unstructured.Unstructured) {
		if o.GetKind() != "NatsCluster" {
			return
		}
		o.SetName(name)
		allow := remoteNS
		if acceptLeaves {
			allow += "," + nsSuperEdge
		}
		annotations := o.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[clusterv1beta1.AnnotationAllowReferencesFrom] = allow
		o.SetAnnotations(annotations)
		_ = unstructured.SetNestedField(o.Object, version, "spec", "version")
		_ = unstructured.SetNestedSlice(o.Object, []any{map[string]any{
			"name": remote, "clusterRef": map[string]any{"name": remote, "namespace": remoteNS},
		}}, "spec", "gateway", "remotes")
		if name != "east" {
			_ = unstructured.SetNestedMap(o.Object, map[string]any{}, "spec", "gateway", "tls")
		}
		if acceptLeaves {
			_ = unstructured.SetNestedField(o.Object, true, "spec", "leafnodes", "accept")
			_ = unstructured.SetNestedMap(o.Object, map[string]any{}, "spec", "leafnodes", "tls")
		}
	}
}

// checkGatewayCABundle checks that the Secret <name>-gateway-ca holds the
// routes CA of the cluster and of its remote, and nothing else.
func checkGatewayCABundle(ctx context.Context, t *testing.T, s *framework.Stack, ns, name, remoteNS, remote string) {
	t.Helper()
	nc, err := s.Cluster(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if !nc.Spec.Gateway.TLSOn() {
		t.Fatalf("%s/%s runs its gateway without TLS: %+v", ns, name, nc.Spec.Gateway)
	}
	bundle, err := s.Kube.CoreV1().Secrets(ns).Get(ctx, name+"-gateway-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range []struct{ ns, name string }{{ns, name}, {remoteNS, remote}} {
		ca, err := s.Kube.CoreV1().Secrets(c.ns).Get(ctx, c.name+"-routes-ca", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, strings.TrimSpace(string(ca.Data["ca.crt"])))
	}
	got := strings.TrimSpace(string(bundle.Data["ca.crt"]))
	if got != strings.Join(want, "\n") {
		t.Fatalf("Secret %s/%s-gateway-ca holds\n%s\nwant the routes CAs of %s and %s", ns, name, got, name, remote)
	}
	t.Logf("%s/%s-gateway-ca: the routes CAs of %s and %s", ns, name, name, remote)
}

// waitGatewaysConnected waits for GatewaysConnected True naming the remote.
func waitGatewaysConnected(ctx context.Context, t *testing.T, s *framework.Stack, ns, name, remote string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	poll.Eventually(t, 3*time.Minute, 250*time.Millisecond, "GatewaysConnected of "+ns+"/"+name, func() error {
		nc, err := s.Cluster(ctx, ns, name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionGatewaysConnected)
		if c == nil {
			return errors.New("no GatewaysConnected condition")
		}
		if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, remote) {
			return fmt.Errorf("GatewaysConnected %s %s: %s", c.Status, c.Reason, c.Message)
		}
		for _, srv := range nc.Status.Servers {
			if !strings.Contains(strings.Join(srv.Gateways, ","), remote) {
				return fmt.Errorf("status.servers %s has gateways %v", srv.Name, srv.Gateways)
			}
		}
		cond = c
		return nil
	})
	return cond
}

// Two NatsClusters, east and west (3 servers each, JetStream, each in a
// namespace of its own), joined by gateways that reference each other,
// with gateway TLS (each one's bundle holds both routes CAs):
// GatewaysConnected is True on both, naming the other, and every server
// lists the other cluster in status.servers[].gateways. An R3 stream
// placed in west (placement cluster west) is written by a publisher
// connected to east's servers only, its messages crossing the gateway,
// while east rolls 2.15.1 -> 2.15.2: the rollout completes, no
// acknowledged message is lost, no server of west restarts, and at no
// moment are two servers of the supercluster silent (the tracker samples
// both clusters every 100 ms). Then both are changed to 2.15.1 at the
// same moment: both finish, and no server of one is out while a server of
// the other is (the supercluster Lease makes them take turns).
func TestSuperclusterOfTwoNatsClusters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	east := framework.Shared(ctx, t, nsSuperEast)
	west := framework.Shared(ctx, t, nsSuperWest)
	edge := framework.Shared(ctx, t, nsSuperEdge)
	west.ApplyExample(ctx, t, nsSuperWest, "natscluster-auth.yaml", superclusterMember("west", "2.15.2", "east", nsSuperEast, false))
	east.ApplyExample(ctx, t, nsSuperEast, "natscluster-auth.yaml", superclusterMember("east", "2.15.1", "west", nsSuperWest, true))
	startLeafOfEast(ctx, t, east, edge)
	east.WaitSettledUpToDate(ctx, t, nsSuperEast, "east", 5*time.Minute)
	west.WaitSettledUpToDate(ctx, t, nsSuperWest, "west", 5*time.Minute)
	ce := waitGatewaysConnected(ctx, t, east, nsSuperEast, "east", "west")
	cw := waitGatewaysConnected(ctx, t, west, nsSuperWest, "west", "east")
	t.Logf("east: GatewaysConnected %s: %s; west: GatewaysConnected %s: %s", ce.Reason, ce.Message, cw.Reason, cw.Message)
	// The gateways run TLS verified on both sides: a connection between
	// them proves each verified the other's certificate against its bundle.
	checkGatewayCABundle(ctx, t, east, nsSuperEast, "east", nsSuperWest, "west")
	checkGatewayCABundle(ctx, t, west, nsSuperWest, "west", nsSuperEast, "east")
	if c := meta.FindStatusCondition(mustCluster(ctx, t, east, nsSuperEast, "east").Status.Conditions, clusterv1beta1.ConditionListenersAuthenticated); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("east's ListenersAuthenticated is %+v, want True", c)
	} else {
		t.Logf("east: ListenersAuthenticated %s: %s", c.Reason, c.Message)
	}

	eastURLs := east.PodURLs(ctx, t, nsSuperEast, "east")
	appCreds := east.CredsFile(ctx, t, nsSuperEast, "demo-app-creds")
	checkRogueServerIsRefused(ctx, t, east, nsSuperEast, "east", appCreds)
	conn := framework.Connect(t, eastURLs, nats.UserCredentials(appCreds))
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 2*time.Minute, time.Second, "the stream ORDERS placed in west, created through east", func() error {
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"ORDERS.>"}, Replicas: 3,
			Storage: jetstream.FileStorage, Placement: &jetstream.Placement{Cluster: "west"}})
		return err
	})
	info, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if c := info.CachedInfo().Cluster; c == nil || c.Name != "west" || !strings.HasPrefix(c.Leader, "west-") {
		t.Fatalf("the stream ORDERS is not in west: %+v", c)
	}
	pub := framework.StartPublisher(ctx, js, "ORDERS.new")
	poll.Eventually(t, time.Minute, 100*time.Millisecond, "the publisher on east to get 200 acknowledgements", func() error {
		if n, attempts, failures, err := pub.Stats(); n < 200 {
			return fmt.Errorf("%d acked, %d attempts, %d failed, last error %v", n, attempts, failures, err)
		}
		return nil
	})

	eastServers, westServers := []string{"east-0", "east-1", "east-2"}, []string{"west-0", "west-1", "west-2"}
	westUIDs := west.PodUIDs(ctx, nsSuperWest, "west-0-0", "west-1-0", "west-2-0")
	te, err := east.StartTracker(ctx, nsSuperEast, "east", eastServers, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer te.Stop()
	tw, err := west.StartTracker(ctx, nsSuperWest, "west", westServers, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Stop()

	applied := time.Now()
	if _, err := east.Nats.ClusterV1beta1().NatsClusters(nsSuperEast).Patch(ctx, "east", types.MergePatchType, []byte(`{"spec":{"version":"2.15.2"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Minute, time.Second, "east on 2.15.2, up to date", func() error {
		nc, err := east.Cluster(ctx, nsSuperEast, "east")
		if err != nil {
			return err
		}
		p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing)
		if nc.Status.Version != "2.15.2" || p == nil || p.Reason != clusterv1beta1.ReasonUpToDate || p.ObservedGeneration != nc.Generation {
			return fmt.Errorf("version %q, Progressing %+v", nc.Status.Version, p)
		}
		return nil
	})
	t.Logf("east rolled to 2.15.2 in %s", time.Since(applied).Round(time.Second))
	te.Stop()
	tw.Stop()

	acked := pub.Stop()
	reader := &framework.StreamReader{Stream: "ORDERS"}
	poll.Eventually(t, 2*time.Minute, time.Second, "reading ORDERS back through east", func() error {
		c, err := nats.Connect(strings.Join(eastURLs, ","), nats.Timeout(2*time.Second), nats.UserCredentials(appCreds))
		if err != nil {
			return err
		}
		defer c.Close()
		fresh, err := jetstream.New(c)
		if err != nil {
			return err
		}
		return reader.Read(ctx, fresh)
	})
	lost := 0
	for id := range acked {
		if !reader.IDs[id] {
			lost++
		}
	}
	t.Logf("publisher on east writing ORDERS in west: %d acknowledged; the stream holds %d; lost %d", len(acked), reader.Total, lost)
	if lost != 0 {
		t.Errorf("%d acknowledged messages are missing from ORDERS", lost)
	}
	for pod, uid := range west.PodUIDs(ctx, nsSuperWest, "west-0-0", "west-1-0", "west-2-0") {
		if westUIDs[pod] != uid {
			t.Errorf("west's pod %s was replaced (UID %s -> %s): only east changed", pod, westUIDs[pod], uid)
		}
	}
	for pod, uids := range te.UIDs() {
		if len(uids) != 2 {
			t.Errorf("east's pod %s had %d UIDs %v, want 2 (restarted exactly once)", pod, len(uids), uids)
		}
	}
	silentSamples := 0
	for _, o := range te.Observations() {
		if len(o.Silent) > 1 {
			t.Errorf("at %s, east's %v were silent at once", o.At.Format(time.RFC3339Nano), o.Silent)
		}
		if len(o.Silent) > 0 {
			silentSamples++
		}
	}
	for _, o := range tw.Observations() {
		if len(o.Silent) > 0 {
			t.Errorf("at %s, west's %v were silent while only east rolled", o.At.Format(time.RFC3339Nano), o.Silent)
		}
	}
	t.Logf("%d samples of east (%d with one server silent) and %d of west (none silent)", len(te.Observations()), silentSamples, len(tw.Observations()))

	// Both members changed at the same moment: they take turns.
	simultaneousVersionChanges(ctx, t, east, west)

	// The leaf cluster, connected to east all along, is connected again
	// after both rollouts, and messages cross both ways.
	checkLeafOfEast(ctx, t, east, edge, appCreds)
}

// downIntervals are the times each stepped pod of a tracker was out: from
// its deletion to its successor's first Ready.
func downIntervals(t *testing.T, tr *framework.Tracker) [][2]time.Time {
	t.Helper()
	var out [][2]time.Time
	for _, d := range tr.Deletions() {
		back, ok := tr.ReadyAfter(d.Pod, d.UID, d.At)
		if !ok {
			t.Errorf("pod %s deleted at %s was not Ready again", d.Pod, d.At.Format(time.RFC3339Nano))
			continue
		}
		out = append(out, [2]time.Time{d.At, back})
	}
	return out
}

// simultaneousVersionChanges patches east and west to 2.15.1 at once:
// both finish, each restarting its servers once, and no server of one is
// out (deleted, its successor not Ready yet) while a server of the other
// is; the one that waits says why in Progressing.
func simultaneousVersionChanges(ctx context.Context, t *testing.T, east, west *framework.Stack) {
	te, err := east.StartTracker(ctx, nsSuperEast, "east", []string{"east-0", "east-1", "east-2"}, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer te.Stop()
	tw, err := west.StartTracker(ctx, nsSuperWest, "west", []string{"west-0", "west-1", "west-2"}, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Stop()
	patch := []byte(`{"spec":{"version":"2.15.1"}}`)
	applied := time.Now()
	for _, m := range []struct {
		s        *framework.Stack
		ns, name string
	}{{east, nsSuperEast, "east"}, {west, nsSuperWest, "west"}} {
		go func() {
			if _, err := m.s.Nats.ClusterV1beta1().NatsClusters(m.ns).Patch(ctx, m.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Errorf("patching %s: %v", m.name, err)
			}
		}()
	}
	waited := ""
	poll.Eventually(t, 15*time.Minute, 500*time.Millisecond, "east and west on 2.15.1, up to date", func() error {
		for _, m := range []struct {
			s        *framework.Stack
			ns, name string
		}{{east, nsSuperEast, "east"}, {west, nsSuperWest, "west"}} {
			nc, err := m.s.Cluster(ctx, m.ns, m.name)
			if err != nil {
				return err
			}
			p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing)
			if p != nil && strings.Contains(p.Message, "which is rolling out") && waited == "" {
				waited = m.name + ": " + p.Message
			}
			if nc.Status.Version != "2.15.1" || p == nil || p.Reason != clusterv1beta1.ReasonUpToDate || p.ObservedGeneration != nc.Generation {
				return fmt.Errorf("%s: version %q, Progressing %+v", m.name, nc.Status.Version, p)
			}
		}
		return nil
	})
	t.Logf("east and west rolled to 2.15.1 together in %s; the one that waited: %s", time.Since(applied).Round(time.Second), waited)
	te.Stop()
	tw.Stop()
	de, dw := downIntervals(t, te), downIntervals(t, tw)
	if len(de) != 3 || len(dw) != 3 {
		t.Errorf("east restarted %d servers and west %d, want 3 each", len(de), len(dw))
	}
	for _, a := range de {
		for _, b := range dw {
			if a[0].Before(b[1]) && b[0].Before(a[1]) {
				t.Errorf("a server of east was out from %s to %s and one of west from %s to %s: two servers of the supercluster down at once",
					a[0].Format(time.RFC3339Nano), a[1].Format(time.RFC3339Nano), b[0].Format(time.RFC3339Nano), b[1].Format(time.RFC3339Nano))
			}
		}
	}
	if waited == "" {
		t.Log("no status sample caught the waiting member's message (it is written between samples)")
	}
	// Both took their turn and gave it up: east's first rollout took the
	// Lease once, the two here at least once each.
	l, err := east.Kube.CoordinationV1().Leases("nats-system").Get(ctx, controller.SuperclusterLeaseName([]string{nsSuperEast + "/east", nsSuperWest + "/west"}), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the supercluster Lease: %v", err)
	}
	holder, turns := "", int32(0)
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseTransitions != nil {
		turns = *l.Spec.LeaseTransitions
	}
	t.Logf("the supercluster Lease: holder %q, %d turns taken", holder, turns)
	if holder != "" || turns < 3 {
		t.Errorf("the supercluster Lease has holder %q and %d turns, want none once both are up to date and at least 3 turns", holder, turns)
	}
}

var nsJoinHeld = framework.SharedNamespace("supercluster-join")

// A running 3-server JetStream cluster with a stream of its own, given
// spec.gateway with a remote east by URL (the hold comes before any
// remote is reached), is held with
// OwnMetaGroup naming its meta leader, its stream and the remote, and the
// way out; no pod is restarted, restart-all does not release it, and
// removing spec.gateway again leaves the cluster up to date.
func TestJoiningASuperclusterWithStreamsOfItsOwnIsHeld(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsJoinHeld)
	s.ApplyExample(ctx, t, nsJoinHeld, "natscluster-jetstream.yaml", nil)
	s.WaitSettledUpToDate(ctx, t, nsJoinHeld, "demo", 3*time.Minute)
	conn := framework.Connect(t, s.PodURLs(ctx, t, nsJoinHeld, "demo"))
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateStream(ctx, t, js, "ORDERS", 3)
	pods := []string{"demo-0-0", "demo-1-0", "demo-2-0"}
	uids := s.PodUIDs(ctx, nsJoinHeld, pods...)

	// A remote by URLs: by clusterRef, gateway TLS (the default) would
	// first wait for the remote's routes CA (CertificateNotReady), and
	// this test is about the hold of the gateway itself.
	join := fmt.Sprintf(`{"metadata":{"annotations":{%q:""}},"spec":{"gateway":{"remotes":[{"name":"east","urls":["nats://east.example.com:7222"]}]}}}`,
		clusterv1beta1.AnnotationRestartAll)
	if _, err := s.Nats.ClusterV1beta1().NatsClusters(nsJoinHeld).Patch(ctx, "demo", types.MergePatchType, []byte(join), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var held *metav1.Condition
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, "Progressing=False OwnMetaGroup", func() error {
		nc, err := s.Cluster(ctx, nsJoinHeld, "demo")
		if err != nil {
			return err
		}
		p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing)
		if p == nil || p.Reason != clusterv1beta1.ReasonOwnMetaGroup || p.ObservedGeneration != nc.Generation {
			return fmt.Errorf("Progressing %+v", p)
		}
		held = p
		return nil
	})
	t.Logf("held: %s", held.Message)
	for _, want := range []string{"adding the gateway cannot be done on a running cluster with JetStream", "it holds 1 stream (ORDERS in the global account)",
		"the supercluster of east has another", "Remove spec.gateway to go back"} {
		if !strings.Contains(held.Message, want) {
			t.Errorf("the hold's message does not say %q", want)
		}
	}
	time.Sleep(10 * time.Second) // long enough for a step the hold should not take
	for pod, uid := range s.PodUIDs(ctx, nsJoinHeld, pods...) {
		if uids[pod] != uid {
			t.Errorf("pod %s was restarted under the hold", pod)
		}
	}
	// Going back takes the restart-all annotation off too: the held join
	// already had the route certificate issued for the headless Service's
	// names (gateway TLS, the default, presents it), so going back is a
	// new route certificate, applied by reload; a restart-all left on
	// would restart every server together for it.
	back := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}},"spec":{"gateway":null}}`, clusterv1beta1.AnnotationRestartAll)
	if _, err := s.Nats.ClusterV1beta1().NatsClusters(nsJoinHeld).Patch(ctx, "demo", types.MergePatchType, []byte(back), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	s.WaitSettledUpToDate(ctx, t, nsJoinHeld, "demo", 2*time.Minute)
	for pod, uid := range s.PodUIDs(ctx, nsJoinHeld, pods...) {
		if uids[pod] != uid {
			t.Errorf("pod %s was restarted going back", pod)
		}
	}
}

var (
	nsTenantA = framework.SharedNamespace("supercluster-tenant-a")
	nsTenantB = framework.SharedNamespace("supercluster-tenant-b")
)

// soloGateway edits the JetStream example into the NatsCluster name: one
// server without JetStream, on version, with a gateway of its own (a
// supercluster of one, no remotes; gateway TLS by default).
func soloGateway(name, version string) func(*unstructured.Unstructured) {
	return func(o *unstructured.Unstructured) {
		if o.GetKind() != "NatsCluster" {
			return
		}
		o.SetName(name)
		_ = unstructured.SetNestedField(o.Object, version, "spec", "version")
		_ = unstructured.SetNestedField(o.Object, int64(1), "spec", "replicas")
		unstructured.RemoveNestedField(o.Object, "spec", "jetstream")
		_ = unstructured.SetNestedMap(o.Object, map[string]any{}, "spec", "gateway")
	}
}

// waitUpToDateOn waits until the NatsCluster runs version, up to date, and
// says how long that took from since.
func waitUpToDateOn(ctx context.Context, t *testing.T, s *framework.Stack, ns, name, version string, since time.Time, within time.Duration) time.Duration {
	t.Helper()
	poll.Eventually(t, within, 250*time.Millisecond, ns+"/"+name+" on "+version+", up to date", func() error {
		nc, err := s.Cluster(ctx, ns, name)
		if err != nil {
			return err
		}
		p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing)
		if nc.Status.Version != version || p == nil || p.Reason != clusterv1beta1.ReasonUpToDate || p.ObservedGeneration != nc.Generation {
			return fmt.Errorf("version %q, Progressing %+v", nc.Status.Version, p)
		}
		return nil
	})
	return time.Since(since)
}

// Two superclusters run by one controller, one tenant's each: while a
// member of tenant a's is stuck on a version that cannot start, a version
// change of tenant b's completes as it does on its own (each supercluster
// takes turns on a Lease of its own, and a member with a server that cannot
// start gives its turn up). With one Lease for every gateway cluster,
// tenant b's restart waited as long as tenant a's rollout stayed in
// progress, which a version that cannot start keeps for ever.
func TestOneTenantsStuckSuperclusterStopsNoOther(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	a := framework.Shared(ctx, t, nsTenantA)
	b := framework.Shared(ctx, t, nsTenantB)
	a.ApplyExample(ctx, t, nsTenantA, "natscluster-jetstream.yaml", soloGateway("a", "2.15.1"))
	b.ApplyExample(ctx, t, nsTenantB, "natscluster-jetstream.yaml", soloGateway("b", "2.15.1"))
	a.WaitSettledUpToDate(ctx, t, nsTenantA, "a", 5*time.Minute)
	b.WaitSettledUpToDate(ctx, t, nsTenantB, "b", 5*time.Minute)
	patch := func(s *framework.Stack, ns, name, version string) time.Time {
		t.Helper()
		if _, err := s.Nats.ClusterV1beta1().NatsClusters(ns).Patch(ctx, name, types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"version":%q}}`, version)), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		return time.Now()
	}

	alone := waitUpToDateOn(ctx, t, b, nsTenantB, "b", "2.15.2", patch(b, nsTenantB, "b", "2.15.2"), 5*time.Minute)
	t.Logf("tenant b's 2.15.1 -> 2.15.2 on its own: %s", alone.Round(time.Millisecond))

	patch(a, nsTenantA, "a", "2.15.99")
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, "tenant a's server named as unable to start 2.15.99", func() error {
		nc, err := a.Cluster(ctx, nsTenantA, "a")
		if err != nil {
			return err
		}
		for _, srv := range nc.Status.Servers {
			if strings.HasPrefix(srv.StartProblem, "ErrImagePull") {
				return nil
			}
		}
		return errors.New(framework.Conditions(nc))
	})
	beside := waitUpToDateOn(ctx, t, b, nsTenantB, "b", "2.15.1", patch(b, nsTenantB, "b", "2.15.1"), 5*time.Minute)
	t.Logf("tenant b's 2.15.2 -> 2.15.1 while tenant a's server cannot start 2.15.99: %s (on its own: %s)", beside.Round(time.Millisecond), alone.Round(time.Millisecond))
	nc, err := a.Cluster(ctx, nsTenantA, "a")
	if err != nil {
		t.Fatal(err)
	}
	if p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing); p == nil || p.Status != metav1.ConditionTrue {
		t.Errorf("tenant a's rollout is no longer in progress, so the check proves nothing: %+v", p)
	}
	la, lb := controller.SuperclusterLeaseName([]string{nsTenantA + "/a"}), controller.SuperclusterLeaseName([]string{nsTenantB + "/b"})
	for _, name := range []string{la, lb} {
		l, err := a.Kube.CoordinationV1().Leases("nats-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("the Lease %s: %v", name, err)
			continue
		}
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		t.Logf("Lease %s (members %s): holder %q", name, l.Annotations[controller.AnnotationSuperclusterMembers], holder)
		if holder != "" {
			t.Errorf("the Lease %s is held by %q: a member with a server that cannot start, or one up to date, holds no turn", name, holder)
		}
	}
	patch(a, nsTenantA, "a", "2.15.1")
	waitUpToDateOn(ctx, t, a, nsTenantA, "a", "2.15.1", time.Now(), 5*time.Minute)
}
