package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
	natsfake "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/fake"
	natsinformers "github.com/nats-operator/nats-operator/pkg/generated/informers/externalversions"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// Controller unit tests in the style of sample-controller: the generated
// fake clientsets, informer indexers seeded by hand (no informer runs), a
// fixed Snapshot instead of asking NATS, and the exact actions one sync
// takes. They test plumbing; test/e2e proves the features on real servers.

// fakeObserver returns the same Snapshot for every cluster.
type fakeObserver struct{ snap *observe.Snapshot }

func (f fakeObserver) Observe(context.Context, observe.Target) *observe.Snapshot { return f.snap }
func (fakeObserver) Forget(string)                                               {}
func (fakeObserver) System(context.Context, observe.Target) (*observe.SystemClient, error) {
	return nil, observe.ErrNoSystemCredentials
}
func (fakeObserver) ViewRemoteMetaLeader(context.Context, observe.Target, *observe.Snapshot) bool {
	return false
}
func (fakeObserver) Close() {}

type fixture struct {
	t *testing.T
	// deletions are the controller's memory of the pods it deleted, kept
	// across the fixture's syncs as one controller process keeps it.
	deletions   *podDeletions
	nc          *clusterv1beta1.NatsCluster
	kubeObjects []runtime.Object
	// uncached are objects the API server holds that the caches have not
	// seen yet (the fake clientset has them, the informers do not).
	uncached []runtime.Object
	// kubeReactors go before the fake kube clientset's own, the first
	// first: an API server that refuses some writes.
	kubeReactors []kubeReactor
	// natsObjects are NatsOperatorTrusts and NatsAccountTrusts.
	natsObjects []runtime.Object
	snap        *observe.Snapshot

	// requeue is when the last sync asked to look again.
	requeue time.Duration
	// systemUserLifetime is Options.SystemUserLifetime (0: the default).
	systemUserLifetime time.Duration
	// podTemplatePolicy is Options.PodTemplatePolicy (zero: any).
	podTemplatePolicy render.PodTemplatePolicy

	kube     *k8sfake.Clientset
	nats     *natsfake.Clientset
	recorder *record.FakeRecorder
}

// kubeReactor is a reaction of the fake kube clientset to verb on resource
// ("*" for any).
type kubeReactor struct {
	verb, resource string
	fn             core.ReactionFunc
}

// newFixture syncs nc with the finalizer this controller adds to every
// NatsCluster (clear f.nc.Finalizers for one it never synced).
func newFixture(t *testing.T, nc *clusterv1beta1.NatsCluster, objs ...runtime.Object) *fixture {
	nc = nc.DeepCopy()
	if !slices.Contains(nc.Finalizers, clusterv1beta1.FinalizerStreams) {
		nc.Finalizers = append(nc.Finalizers, clusterv1beta1.FinalizerStreams)
	}

	return &fixture{t: t, nc: nc, kubeObjects: objs, deletions: &podDeletions{}, snap: &observe.Snapshot{
		Verdict: observe.Verdict{Status: metav1.ConditionUnknown, Reason: clusterv1beta1.ReasonObservationFailed, Message: "not observed"},
	}}
}

// sync runs one sync of the fixture's NatsCluster and returns the actions
// that write (list and watch are left out).
func (f *fixture) sync() []core.Action {
	f.t.Helper()
	ctx := context.Background()
	f.kube = k8sfake.NewClientset(append(slices.Clone(f.kubeObjects), f.uncached...)...)
	for _, r := range slices.Backward(f.kubeReactors) {
		f.kube.PrependReactor(r.verb, r.resource, r.fn)
	}
	f.nats = natsfake.NewSimpleClientset(append([]runtime.Object{f.nc}, f.natsObjects...)...)
	ki := kubeinformers.NewSharedInformerFactory(f.kube, 0)
	ni := natsinformers.NewSharedInformerFactory(f.nats, 0)
	inf := testInformers(ki, ni)
	c := New(ctx, Options{KubeClient: f.kube, NatsClient: f.nats, Informers: inf, Metrics: NewMetrics(prometheus.NewRegistry()), SystemUserLifetime: f.systemUserLifetime,
		PodTemplatePolicy: f.podTemplatePolicy})
	f.recorder = record.NewFakeRecorder(100)
	c.recorder = f.recorder
	c.gatherer.deletions = f.deletions
	c.observer = fakeObserver{f.snap}
	c.checkFacts = func(after, gathered *facts) {
		if d := cmp.Diff(gathered, after, cmp.Exporter(func(reflect.Type) bool { return true })); d != "" {
			f.t.Errorf("the sync changed the facts it gathered (-gathered +after):\n%s", d)
		}
	}
	must := func(err error) {
		if err != nil {
			f.t.Fatal(err)
		}
	}
	must(inf.Clusters.Informer().GetIndexer().Add(f.nc))
	for _, o := range f.natsObjects {
		switch o := o.(type) {
		case *trustv1beta1.NatsOperatorTrust:
			must(inf.OperatorTrusts.Informer().GetIndexer().Add(o))
		case *trustv1beta1.NatsAccountTrust:
			must(inf.AccountTrusts.Informer().GetIndexer().Add(o))
		case *clusterv1beta1.NatsCluster:
			must(inf.Clusters.Informer().GetIndexer().Add(o))
		}
	}
	must(addToCaches(inf, f.kubeObjects))
	requeue, err := c.sync(ctx, cache.MetaObjectToName(f.nc))
	if err != nil {
		f.t.Fatalf("sync: %v", err)
	}
	f.requeue = requeue
	var out []core.Action
	for _, a := range append(f.kube.Actions(), f.nats.Actions()...) {
		// Reads of the Secrets a cluster names (by name: secrets.go) are
		// not what these tests look at; secrets_test.go does.
		secretRead := a.GetVerb() == "get" && a.GetResource().Resource == "secrets"
		if a.GetVerb() != "list" && a.GetVerb() != "watch" && !secretRead {
			out = append(out, a)
		}
	}
	return out
}

// keepObjects makes what the API server holds after the last sync the
// objects of the next (the caches then hold them too): the next sync starts
// from the writes of this one.
func (f *fixture) keepObjects() {
	f.t.Helper()
	ctx := context.Background()
	must := func(err error) {
		if err != nil {
			f.t.Fatal(err)
		}
	}
	all := metav1.ListOptions{}
	cms, err := f.kube.CoreV1().ConfigMaps("").List(ctx, all)
	must(err)
	stss, err := f.kube.AppsV1().StatefulSets("").List(ctx, all)
	must(err)
	pods, err := f.kube.CoreV1().Pods("").List(ctx, all)
	must(err)
	svcs, err := f.kube.CoreV1().Services("").List(ctx, all)
	must(err)
	secrets, err := f.kube.CoreV1().Secrets("").List(ctx, all)
	must(err)
	pdbs, err := f.kube.PolicyV1().PodDisruptionBudgets("").List(ctx, all)
	must(err)
	nps, err := f.kube.NetworkingV1().NetworkPolicies("").List(ctx, all)
	must(err)
	f.kubeObjects = slices.Concat(itemsOf(cms.Items), itemsOf(stss.Items), itemsOf(pods.Items), itemsOf(svcs.Items),
		itemsOf(secrets.Items), itemsOf(pdbs.Items), itemsOf(nps.Items))
	f.uncached = nil
}

// itemsOf are pointers to a list's items, as runtime.Objects.
func itemsOf[T any, P interface {
	*T
	runtime.Object
}](items []T) []runtime.Object {
	out := make([]runtime.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

// describe renders actions as "verb resource[/subresource] name".
func describe(actions []core.Action) []string {
	var out []string
	for _, a := range actions {
		res := a.GetResource().Resource
		if sub := a.GetSubresource(); sub != "" {
			res += "/" + sub
		}
		name := ""
		switch a := a.(type) {
		case core.CreateAction:
			name = a.GetObject().(metav1.Object).GetName()
		case core.UpdateAction:
			name = a.GetObject().(metav1.Object).GetName()
		case core.DeleteAction:
			name = a.GetName()
		case core.PatchAction:
			name = a.GetName()
		}
		out = append(out, a.GetVerb()+" "+res+" "+name)
	}
	return out
}

// writtenStatus is the NatsCluster of the sync's status update, if any.
func writtenStatus(actions []core.Action) *clusterv1beta1.NatsCluster {
	for _, a := range actions {
		if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "status" {
			return u.GetObject().(*clusterv1beta1.NatsCluster)
		}
	}
	return nil
}

// running are a cluster's objects as the caches hold them once created, at
// out, with a Ready pod per server started from its template.
func running(t *testing.T, out *render.Output) []runtime.Object {
	t.Helper()
	// The budget's status as the disruption controller computes it with
	// every server up.
	n := int32(len(out.Servers))
	objs := []runtime.Object{out.ClientService.DeepCopy(), out.HeadlessService.DeepCopy(), budgetAllowing(out, n, n, 1)}
	if out.NetworkPolicy != nil {
		objs = append(objs, out.NetworkPolicy.DeepCopy())
	}
	for i, s := range out.Servers {
		cm := s.ConfigMap.DeepCopy()
		sts := s.StatefulSet.DeepCopy()
		sts.UID = types.UID(fmt.Sprintf("uid-sts-%d", i))
		objs = append(objs, cm, sts, podOf(sts))
	}
	return objs
}

// podOf is the pod the StatefulSet controller would create, Ready.
func podOf(sts *appsv1.StatefulSet) *corev1.Pod {
	t := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sts.Namespace, Name: sts.Name + "-0", UID: types.UID("uid-pod-" + sts.Name),
			Labels: sts.Spec.Template.Labels, Annotations: sts.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: &t}},
		},
		Status: corev1.PodStatus{PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// settled is a Snapshot of every server answering on revision rev.
func settled(out *render.Output, rev string) *observe.Snapshot {
	snap := &observe.Snapshot{Verdict: observe.Verdict{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonAllGroupsCurrent, Message: "every Raft group has a leader and every member is current"}}
	for _, s := range out.Servers {
		snap.Servers = append(snap.Servers, observe.Server{Name: s.Name, Answered: true, ConfigRevision: rev, Version: s.Facts.Version})
	}
	return snap
}

func mustRender(t *testing.T, nc *clusterv1beta1.NatsCluster) *render.Output {
	t.Helper()
	out, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertActions(t *testing.T, got []core.Action, want ...string) {
	t.Helper()
	if d := describe(got); !slices.Equal(d, want) {
		t.Errorf("actions:\n  %s\nwant:\n  %s", strings.Join(d, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestSyncCreatesEveryObjectOfANewCluster(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.Replicas(2))
	f := newFixture(t, nc)
	f.nc.Finalizers = nil
	acts := f.sync()
	// The actions of the two clientsets are listed apart: the finalizer's
	// patch comes first of all (write adds it before any object).
	assertActions(t, acts,
		"create secrets demo-system-user",
		"create secrets demo-routes-ca",
		"create secrets demo-routes-tls",
		"create services demo", "create services demo-headless", "create poddisruptionbudgets demo",
		"create networkpolicies demo",
		"create configmaps demo-0-config", "create statefulsets demo-0",
		"create configmaps demo-1-config", "create statefulsets demo-1",
		"patch natsclusters demo",
		"update natsclusters/status demo")
	st := writtenStatus(acts)
	if p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing); p == nil || p.Reason != clusterv1beta1.ReasonCreating {
		t.Errorf("Progressing %+v, want Creating", p)
	}
}

func TestSyncTakesOneStepPerSync(t *testing.T) {
	old := rt.NewCluster("ns", "demo", rt.Version("2.15.1"))
	outOld := mustRender(t, old)
	nc := rt.NewCluster("ns", "demo", rt.Version("2.15.2"))
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: outOld.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	f := newFixture(t, nc, running(t, outOld)...)
	f.snap = settled(outOld, outOld.Revision)
	acts := f.sync()
	// The cluster had no system user (an older release made it) and changes
	// anyway: the change adds the system user, its Secret first.
	assertActions(t, acts,
		"create secrets demo-system-user",
		"update statefulsets demo-2", "update configmaps demo-2-config", "delete pods demo-2-0",
		"update natsclusters/status demo")
	if ev := events(f.recorder); !slices.ContainsFunc(ev, func(e string) bool {
		return strings.Contains(e, clusterv1beta1.EventServerRestarted+" Restarting demo-2 onto revision")
	}) {
		t.Errorf("events %v, want ServerRestarted for demo-2", ev)
	}
}

func TestSyncWritesNothingWhenNothingDiffers(t *testing.T) {
	nc := rt.NewCluster("ns", "demo")
	out := mustRender(t, nc)
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: out.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	f := newFixture(t, nc, running(t, out)...)
	f.snap = settled(out, out.Revision)
	first := f.sync()
	assertActions(t, first, "update natsclusters/status demo") // the observation enters status
	f.nc = writtenStatus(first)
	assertActions(t, f.sync())
	if ev := events(f.recorder); len(ev) != 0 {
		t.Errorf("events %v, want none", ev)
	}
}

func TestSyncEmitsAnEventPerHoldTransitionOnly(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.Auth("missing"))
	f := newFixture(t, nc)
	acts := f.sync()
	assertActions(t, acts, "create services demo", "create services demo-headless", "create poddisruptionbudgets demo",
		"update natsclusters/status demo")
	if ev := events(f.recorder); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+clusterv1beta1.ReasonTrustNotFound+" ") {
		t.Fatalf("events %v, want one TrustNotFound", ev)
	}

	f.nc = writtenStatus(acts)
	f.kubeObjects = []runtime.Object{mustRender(t, rt.NewCluster("ns", "demo")).ClientService}
	f.sync()
	if ev := events(f.recorder); len(ev) != 0 {
		t.Fatalf("events %v on a second sync of the same hold, want none", ev)
	}

	fixed := f.nc.DeepCopy()
	fixed.Spec.Auth = nil
	f.nc = fixed
	f.sync()
	if ev := events(f.recorder); len(ev) != 1 || !strings.Contains(ev[0], clusterv1beta1.ReasonTrustNotFound+" ended") {
		t.Fatalf("events %v, want one saying the hold ended", ev)
	}
}

func events(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// testInformers are the controller's informers from a fixture's factories.
func testInformers(ki kubeinformers.SharedInformerFactory, ni natsinformers.SharedInformerFactory) Informers {
	return Informers{
		Clusters:        ni.Cluster().V1beta1().NatsClusters(),
		OperatorTrusts:  ni.Trust().V1beta1().NatsOperatorTrusts(),
		AccountTrusts:   ni.Trust().V1beta1().NatsAccountTrusts(),
		StatefulSets:    ki.Apps().V1().StatefulSets(),
		ConfigMaps:      ki.Core().V1().ConfigMaps(),
		Services:        ki.Core().V1().Services(),
		Pods:            ki.Core().V1().Pods(),
		PDBs:            ki.Policy().V1().PodDisruptionBudgets(),
		Secrets:         metadatainformer.NewSharedInformerFactory(metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), 0).ForResource(SecretsResource),
		NetworkPolicies: ki.Networking().V1().NetworkPolicies(),
		Backups:         ni.Cluster().V1beta1().NatsBackups(),
		Restores:        ni.Cluster().V1beta1().NatsRestores(),
	}
}

// addToCaches puts kube objects into the informers' caches.
func addToCaches(inf Informers, objs []runtime.Object) error {
	var err error
	add := func(e error) { err = errors.Join(err, e) }
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			add(inf.StatefulSets.Informer().GetIndexer().Add(o))
		case *corev1.ConfigMap:
			add(inf.ConfigMaps.Informer().GetIndexer().Add(o))
		case *corev1.Pod:
			add(inf.Pods.Informer().GetIndexer().Add(o))
		case *corev1.Service:
			add(inf.Services.Informer().GetIndexer().Add(o))
		case *corev1.Secret:
			// The metadata the informer holds; the fake clientset the
			// values a read by name returns.
			m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: *o.ObjectMeta.DeepCopy()}
			add(inf.Secrets.Informer().GetIndexer().Add(m))
		case *networkingv1.NetworkPolicy:
			add(inf.NetworkPolicies.Informer().GetIndexer().Add(o))
		default:
			if pdb, ok := o.(metav1.Object); ok && strings.HasSuffix(fmt.Sprintf("%T", o), "PodDisruptionBudget") {
				add(inf.PDBs.Informer().GetIndexer().Add(pdb))
			}
		}
	}
	return err
}
