package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// kubeObject is a typed kube object: what the fake clientset stores.
type kubeObject interface {
	metav1.Object
	runtime.Object
}

// An object of a name the controller would create, that this NatsCluster
// does not control (metav1.IsControlledBy: no controller reference with the
// cluster's UID), is reported and left alone: Progressing=False
// ReconcileFailed naming it, one Warning Event, and no write to it. This is
// TestNameCollisionIsReported of test/e2e (a ConfigMap demo-0-config made
// beforehand) for every kind the controller creates, with no owner or owned
// by another NatsCluster of the same name (one deleted and made again, whose
// objects the garbage collector has not removed yet), and whether the
// caches have seen it yet (a gathered object holds the cluster; one they
// have not is found by the create it refuses with AlreadyExists).
func TestAnObjectOfTheSameNameNotControlledByTheClusterIsReportedAndLeftAlone(t *testing.T) {
	nc := rt.NewCluster("nats", "demo", rt.Replicas(2))
	out := mustRender(t, nc)
	previous := nc.DeepCopy()
	previous.UID = "uid-demo-deleted-and-made-again"

	for _, kind := range []struct {
		kind string
		gvr  schema.GroupVersionResource
		obj  kubeObject
		// cached and uncached are the writes of the sync when the caches
		// hold the object and when they do not yet (then the create the
		// API server refuses with AlreadyExists is among them).
		cached, uncached []string
	}{
		{
			kind: "ConfigMap", gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, obj: out.Servers[0].ConfigMap,
			// Gathered, it holds the cluster before anything is rendered:
			// only the Services and the PDB (they need no render) are made.
			cached: []string{"create services demo", "create services demo-headless", "create poddisruptionbudgets demo", "update natsclusters/status demo"},
			uncached: []string{secrets, "create services demo", "create services demo-headless", "create poddisruptionbudgets demo", "create networkpolicies demo",
				"create configmaps demo-0-config", "update natsclusters/status demo"},
		},
		{
			kind: "StatefulSet", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, obj: out.Servers[0].StatefulSet,
			cached: []string{"create services demo", "create services demo-headless", "create poddisruptionbudgets demo", "update natsclusters/status demo"},
			uncached: []string{secrets, "create services demo", "create services demo-headless", "create poddisruptionbudgets demo", "create networkpolicies demo",
				"create configmaps demo-0-config", "create statefulsets demo-0", "update natsclusters/status demo"},
		},
		{
			kind: "Service", gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}, obj: out.ClientService,
			cached:   []string{secrets, "update natsclusters/status demo"},
			uncached: []string{secrets, "create services demo", "update natsclusters/status demo"},
		},
		{
			kind: "Service", gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}, obj: out.HeadlessService,
			cached:   []string{secrets, "create services demo", "update natsclusters/status demo"},
			uncached: []string{secrets, "create services demo", "create services demo-headless", "update natsclusters/status demo"},
		},
		{
			kind: "PodDisruptionBudget", gvr: schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, obj: out.PDB,
			cached:   []string{secrets, "create services demo", "create services demo-headless", "update natsclusters/status demo"},
			uncached: []string{secrets, "create services demo", "create services demo-headless", "create poddisruptionbudgets demo", "update natsclusters/status demo"},
		},
		{
			kind: "NetworkPolicy", gvr: schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, obj: out.NetworkPolicy,
			cached: []string{secrets, "create services demo", "create services demo-headless", "create poddisruptionbudgets demo", "update natsclusters/status demo"},
			uncached: []string{secrets, "create services demo", "create services demo-headless", "create poddisruptionbudgets demo", "create networkpolicies demo",
				"update natsclusters/status demo"},
		},
	} {
		for _, owner := range []struct {
			name string
			// theirs makes the rendered object someone else's.
			theirs func(o kubeObject)
		}{
			{"with no owner", func(o kubeObject) {
				o.SetOwnerReferences(nil)
				o.SetLabels(map[string]string{"app.kubernetes.io/managed-by": "someone-else"})
				o.SetAnnotations(map[string]string{"made-by": "someone else"})
				if cm, ok := o.(*corev1.ConfigMap); ok {
					cm.Data = map[string]string{render.ConfigKey: "someone else's"}
				}
			}},
			{"controlled by another NatsCluster demo", func(o kubeObject) {
				o.SetOwnerReferences([]metav1.OwnerReference{render.OwnerReference(previous)})
			}},
		} {
			for _, cached := range []bool{true, false} {
				name := kind.kind + " " + kind.obj.GetName() + " " + owner.name
				if cached {
					name += ", in the cache"
				} else {
					name += ", not yet in the cache"
				}
				t.Run(name, func(t *testing.T) {
					theirs := kind.obj.DeepCopyObject().(kubeObject)
					owner.theirs(theirs)
					theirs.SetUID(types.UID("uid-theirs"))
					theirs.SetResourceVersion("7")
					f := newFixture(t, nc)
					if cached {
						f.kubeObjects = []runtime.Object{theirs.DeepCopyObject()}
					} else {
						f.uncached = []runtime.Object{theirs.DeepCopyObject()}
					}
					acts := f.sync()

					named := kind.kind + " nats/" + theirs.GetName()
					st := writtenStatus(acts)
					if st == nil {
						t.Fatal("no status written")
					}
					p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing)
					if p == nil {
						t.Fatal("no Progressing condition written")
					}
					if diff := cmp.Diff(
						metav1.Condition{Type: clusterv1beta1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonReconcileFailed, ObservedGeneration: nc.Generation},
						metav1.Condition{Type: p.Type, Status: p.Status, Reason: p.Reason, ObservedGeneration: p.ObservedGeneration},
					); diff != "" {
						t.Errorf("Progressing (-want +got):\n%s", diff)
					}
					if !strings.Contains(p.Message, named+" ") {
						t.Errorf("the Progressing message does not name %s: %s", named, p.Message)
					}

					var got [][2]string
					for _, e := range events(f.recorder) {
						typ, rest, _ := strings.Cut(e, " ")
						reason, msg, _ := strings.Cut(rest, " ")
						got = append(got, [2]string{typ, reason})
						if !strings.Contains(msg, named+" ") {
							t.Errorf("the %s Event does not name %s: %s", reason, named, msg)
						}
					}
					if diff := cmp.Diff([][2]string{{"Warning", clusterv1beta1.ReasonReconcileFailed}}, got); diff != "" {
						t.Errorf("Events (type, reason) (-want +got):\n%s", diff)
					}

					// No write touches it: none names it but, when the caches
					// have not seen it, the create the API server refuses.
					for _, a := range acts {
						if a.GetResource() != kind.gvr || actionName(a) != theirs.GetName() {
							continue
						}
						if cached || a.GetVerb() != "create" {
							t.Errorf("the sync wrote someone else's %s: %s", named, describe([]core.Action{a}))
						}
					}
					after, err := f.kube.Tracker().Get(kind.gvr, theirs.GetNamespace(), theirs.GetName())
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(runtime.Object(theirs), after); diff != "" {
						t.Errorf("someone else's %s changed (-before +after):\n%s", named, diff)
					}

					want := kind.cached
					if !cached {
						want = kind.uncached
					}
					// Nothing after the object in the way is written, and no
					// server is created.
					if diff := cmp.Diff(expand(want), describe(acts)); diff != "" {
						t.Errorf("writes (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// actionName is the name of the object an action writes.
func actionName(a core.Action) string {
	if d := describe([]core.Action{a}); len(d) == 1 {
		if i := strings.LastIndexByte(d[0], ' '); i >= 0 {
			return d[0][i+1:]
		}
	}
	return ""
}

// secrets stands, in a list of writes, for the Secrets a sync makes for a
// new cluster before any other object (its system user and route TLS).
const secrets = "(secrets)"

// expand replaces secrets in writes by the writes it stands for.
func expand(writes []string) []string {
	var out []string
	for _, w := range writes {
		if w == secrets {
			out = append(out, "create secrets demo-system-user", "create secrets demo-routes-ca", "create secrets demo-routes-tls")
			continue
		}
		out = append(out, w)
	}
	return out
}
