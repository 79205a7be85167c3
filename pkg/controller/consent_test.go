package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/nats-operator/nats-operator/internal/pki"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	natsfake "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/fake"
	natsinformers "github.com/nats-operator/nats-operator/pkg/generated/informers/externalversions"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// allowReferencesFrom annotates nc to allow clusterRefs from namespaces.
func allowReferencesFrom(nc *clusterv1beta1.NatsCluster, namespaces string) *clusterv1beta1.NatsCluster {
	nc = nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[clusterv1beta1.AnnotationAllowReferencesFrom] = namespaces
	return nc
}

// A clusterRef of a leaf or gateway remote to a NatsCluster of another
// namespace is followed only where that cluster allows it, with
// cluster.nats-operator.io/allow-references-from listing the referring
// namespace (or *): without, the referring cluster holds with InvalidSpec
// naming the field and the annotation that would allow it, no server is
// written and nothing of the other namespace's Secrets is read. A
// reference within the namespace needs no consent.
func TestALeafOrGatewayClusterRefToAnotherNamespaceNeedsItsConsent(t *testing.T) {
	ca, err := pki.NewCA("hub routes CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leafTo := func(ns string, tls bool) *clusterv1beta1.NatsCluster {
		r := clusterv1beta1.LeafNodeRemote{Name: "hub", ClusterRef: &clusterv1beta1.NatsClusterReference{Name: "hub", Namespace: ns}}
		if tls {
			r.TLS = &clusterv1beta1.LeafRemoteTLS{}
		}
		return rt.NewCluster("edge", "leaf", rt.LeafNodes(false, r))
	}
	hub := func(ns, allow string) *clusterv1beta1.NatsCluster {
		h := rt.NewCluster(ns, "hub", rt.LeafNodes(true))
		if allow != "" {
			h = allowReferencesFrom(h, allow)
		}
		return h
	}
	hubCA := func(ns string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hub-routes-ca"}, Data: map[string][]byte{"ca.crt": ca.Cert}}
	}
	gatewayTo := rt.NewCluster("east", "east", rt.Gateway(rt.GatewayTo("west", "west")))
	gatewayTo.Spec.Gateway.TLS = &clusterv1beta1.GatewayTLS{}
	west := rt.NewCluster("west", "west", rt.Gateway(rt.GatewayTo("east", "east")))
	westCA := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "west", Name: "west-routes-ca"}, Data: map[string][]byte{"ca.crt": ca.Cert}}

	for _, tc := range []struct {
		name   string
		nc     *clusterv1beta1.NatsCluster
		other  runtime.Object // nil: none
		secret *corev1.Secret
		// want is what the InvalidSpec hold says; "" for no hold.
		want []string
	}{
		{"a leaf remote over TLS, no annotation", leafTo("core", true), hub("core", ""), hubCA("core"), []string{
			"spec.leafnodes.remotes[0].clusterRef: NatsCluster core/hub does not allow references from namespace edge (it has no annotation cluster.nats-operator.io/allow-references-from)",
			"the annotation cluster.nats-operator.io/allow-references-from=edge on NatsCluster core/hub would allow it"}},
		{"a leaf remote without TLS, no annotation", leafTo("core", false), hub("core", ""), nil, []string{
			"spec.leafnodes.remotes[0].clusterRef: NatsCluster core/hub does not allow references from namespace edge"}},
		{"a leaf remote, other namespaces allowed", leafTo("core", true), hub("core", "team-a,team-b"), hubCA("core"), []string{
			`it has cluster.nats-operator.io/allow-references-from="team-a,team-b", which does not list namespace edge`}},
		{"a leaf remote to a hub that does not exist", leafTo("core", true), nil, hubCA("core"), []string{
			"spec.leafnodes.remotes[0].clusterRef: NatsCluster core/hub does not exist"}},
		{"a gateway remote, no annotation", gatewayTo, west, westCA, []string{
			"spec.gateway.remotes[0].clusterRef: NatsCluster west/west does not allow references from namespace east",
			"cluster.nats-operator.io/allow-references-from=east on NatsCluster west/west"}},
		{"a leaf remote, this namespace allowed", leafTo("core", true), hub("core", "team-a, edge"), hubCA("core"), nil},
		{"a leaf remote, every namespace allowed", leafTo("core", true), hub("core", "*"), hubCA("core"), nil},
		{"a gateway remote, allowed", gatewayTo, allowReferencesFrom(west, "east"), westCA, nil},
		{"a leaf remote in the same namespace", leafTo("", true), hub("edge", ""), hubCA("edge"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.secret != nil {
				objs = append(objs, tc.secret)
			}
			f := newFixture(t, tc.nc, objs...)
			if tc.other != nil {
				f.natsObjects = []runtime.Object{tc.other}
			}
			acts := f.sync()
			servers := slices.ContainsFunc(acts, func(a core.Action) bool { return a.GetResource().Resource == "statefulsets" })
			ev := events(f.recorder)
			if tc.want == nil {
				// Followed: the servers are created, or (the gateway) the
				// bundle with west's CA is.
				bundle := slices.ContainsFunc(acts, func(a core.Action) bool {
					c, ok := a.(core.CreateAction)
					return ok && c.GetObject().(metav1.Object).GetName() == "east-gateway-ca"
				})
				if (!servers && !bundle) || slices.ContainsFunc(ev, func(e string) bool { return strings.Contains(e, "clusterRef") }) {
					t.Fatalf("actions %v, events %v: want the reference followed, nothing held for it", describe(acts), ev)
				}
				// The other namespace's CA is read then (so its absence
				// below means something).
				if ns := tc.secret.Namespace; ns != tc.nc.Namespace && !slices.ContainsFunc(f.kube.Actions(), func(a core.Action) bool {
					return a.GetResource().Resource == "secrets" && a.GetNamespace() == ns
				}) {
					t.Errorf("no Secret of namespace %s read once the reference is allowed", ns)
				}
				return
			}
			if servers || slices.ContainsFunc(acts, func(a core.Action) bool { return a.GetResource().Resource == "configmaps" }) {
				t.Errorf("actions %v: a server written without the referenced cluster's consent", describe(acts))
			}
			if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+clusterv1beta1.ReasonInvalidSpec+" ") {
				t.Fatalf("events %v, want one InvalidSpec", ev)
			}
			for _, w := range tc.want {
				if !strings.Contains(ev[0], w) {
					t.Errorf("the hold does not say %q: %s", w, ev[0])
				}
			}
			for _, a := range f.kube.Actions() {
				if a.GetResource().Resource == "secrets" && a.GetNamespace() != tc.nc.Namespace {
					t.Errorf("%s secrets in namespace %s without its consent", a.GetVerb(), a.GetNamespace())
				}
			}
			t.Log(ev[0])
		})
	}
}

// A NatsCluster created, deleted, or whose allow-references-from
// annotation changes enqueues the clusters that name it by clusterRef (a
// gateway or a leaf remote, of any namespace); an update of anything else
// (its status, every sync) does not.
func TestGatewayAndLeafReferrersAreEnqueuedWhenConsentChanges(t *testing.T) {
	west := rt.NewCluster("west", "west")
	east := rt.NewCluster("east", "east", rt.Gateway(rt.GatewayTo("west", "west")))
	leaf := rt.NewCluster("edge", "leaf", rt.LeafNodes(false, clusterv1beta1.LeafNodeRemote{Name: "west", ClusterRef: &clusterv1beta1.NatsClusterReference{Name: "west", Namespace: "west"}}))
	local := rt.NewCluster("west", "local", rt.LeafNodes(false, clusterv1beta1.LeafNodeRemote{Name: "west", ClusterRef: &clusterv1beta1.NatsClusterReference{Name: "west"}}))
	elsewhere := rt.NewCluster("edge", "other", rt.LeafNodes(false, clusterv1beta1.LeafNodeRemote{Name: "west", ClusterRef: &clusterv1beta1.NatsClusterReference{Name: "west"}}))
	kube := k8sfake.NewClientset()
	nats := natsfake.NewSimpleClientset()
	inf := testInformers(kubeinformers.NewSharedInformerFactory(kube, 0), natsinformers.NewSharedInformerFactory(nats, 0))
	c := New(context.Background(), Options{KubeClient: kube, NatsClient: nats, Informers: inf, Metrics: NewMetrics(prometheus.NewRegistry())})
	for _, nc := range []*clusterv1beta1.NatsCluster{west, east, leaf, local, elsewhere} {
		if err := inf.Clusters.Informer().GetIndexer().Add(nc); err != nil {
			t.Fatal(err)
		}
	}
	drain := func() []string {
		var out []string
		for c.queue.Len() > 0 {
			k, _ := c.queue.Get()
			c.queue.Done(k)
			out = append(out, k.String())
		}
		slices.Sort(out)
		return out
	}
	drain()
	for _, obj := range []interface{}{west, cache.DeletedFinalStateUnknown{Key: "west/west", Obj: west}} {
		c.enqueueClusterRefReferrers(obj)
		if got, want := drain(), []string{"east/east", "edge/leaf", "west/local"}; !slices.Equal(got, want) {
			t.Errorf("enqueued %v, want %v (every cluster naming west/west, not edge/other)", got, want)
		}
	}

	statusOnly := west.DeepCopy()
	statusOnly.Status.ObservedGeneration = 7
	annotated := allowReferencesFrom(west, "east")
	for _, tc := range []struct {
		name     string
		old, obj *clusterv1beta1.NatsCluster
		want     bool
	}{
		{"its status", west, statusOnly, false},
		{"the annotation added", west, annotated, true},
		{"the annotation changed", annotated, allowReferencesFrom(west, "east,edge"), true},
		{"the annotation emptied", annotated, allowReferencesFrom(west, ""), true},
		{"the annotation removed", annotated, west, true},
	} {
		if got := consentChanged(tc.old, tc.obj); got != tc.want {
			t.Errorf("%s: consentChanged %v, want %v", tc.name, got, tc.want)
		}
	}
}
