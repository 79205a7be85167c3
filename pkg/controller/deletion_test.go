package controller

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// patchedFinalizers are the finalizers the sync's NatsCluster patch sets;
// ok is false without such a patch.
func patchedFinalizers(t *testing.T, actions []core.Action) (finalizers []string, ok bool) {
	t.Helper()
	for _, a := range actions {
		p, isPatch := a.(core.PatchAction)
		if !isPatch || a.GetResource().Resource != "natsclusters" {
			continue
		}
		var body struct {
			Metadata struct {
				ResourceVersion *string  `json:"resourceVersion"`
				Finalizers      []string `json:"finalizers"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Fatal(err)
		}
		if body.Metadata.ResourceVersion == nil {
			t.Errorf("patch %s carries no resourceVersion", p.GetPatch())
		}
		if body.Metadata.Finalizers != nil {
			return body.Metadata.Finalizers, true
		}
	}
	return nil, false
}

// deletingFixture is a running 3-server cluster being deleted, observed
// settled and holding streams, with demo-2's objects and the client Service
// missing: a sync that created servers or Services would show it.
func deletingFixture(t *testing.T, streams ...string) *fixture {
	nc := rt.NewCluster("ns", "demo", rt.Replicas(3))
	out := mustRender(t, nc)
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: out.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	now := metav1.Now()
	nc.DeletionTimestamp = &now
	nc.ResourceVersion = "7"
	var objs []runtime.Object
	for _, o := range running(t, out) {
		name := o.(metav1.Object).GetName()
		if _, svc := o.(*corev1.Service); (svc && name == "demo") || strings.HasPrefix(name, "demo-2") {
			continue
		}
		objs = append(objs, o)
	}
	f := newFixture(t, nc, objs...)
	f.snap = settled(out, out.Revision)
	if len(streams) > 0 {
		acc := observe.AccountStreams{Account: "$G"}
		for _, s := range streams {
			acc.Streams = append(acc.Streams, observe.StreamInfo{Name: s, Replicas: 3})
		}
		f.snap.Streams = []observe.AccountStreams{acc}
	}
	return f
}

func TestSyncAddsTheFinalizerToANewClusterFirst(t *testing.T) {
	f := newFixture(t, rt.NewCluster("ns", "demo"))
	f.nc.Finalizers = []string{"example.com/other"}
	acts := f.sync()
	got, ok := patchedFinalizers(t, acts)
	if want := []string{"example.com/other", clusterv1beta1.FinalizerStreams}; !ok || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("patched finalizers %v (patched %v), want %v", got, ok, want)
	}
	if st := writtenStatus(acts); st == nil || !hasFinalizer(st) {
		t.Errorf("status written to %+v, want the patched NatsCluster (its resourceVersion)", st)
	}
}

func TestSyncKeepsTheFinalizerOfADeletedClusterHoldingStreams(t *testing.T) {
	f := deletingFixture(t, "ORDERS", "ONE")
	acts := f.sync()
	// Nothing but status: no server or Service created, no Secret.
	assertActions(t, acts, "update natsclusters/status demo")
	st := writtenStatus(acts)
	p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing)
	if p == nil || p.Status != metav1.ConditionFalse || p.Reason != clusterv1beta1.ReasonDeleting || !strings.Contains(p.Message, "$G/ONE, $G/ORDERS") {
		t.Fatalf("Progressing %+v, want False Deleting naming $G/ONE, $G/ORDERS", p)
	}
	if !hasFinalizer(st) {
		t.Errorf("finalizers %v, want %s kept", st.Finalizers, clusterv1beta1.FinalizerStreams)
	}
	if ev := events(f.recorder); len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+clusterv1beta1.ReasonDeleting+" ") {
		t.Errorf("events %v, want one Warning Deleting: the hold notifies", ev)
	}
	f.nc = st
	assertActions(t, f.sync()) // the same hold again writes nothing
}

func TestSyncReleasesTheFinalizerOfADeletedCluster(t *testing.T) {
	tests := []struct {
		name    string
		fixture func(*testing.T) *fixture
	}{
		{
			name:    "a cluster holding no streams is released",
			fixture: func(t *testing.T) *fixture { return deletingFixture(t) },
		},
		{
			name: "force-delete releases a cluster holding streams",
			fixture: func(t *testing.T) *fixture {
				f := deletingFixture(t, "ORDERS")
				f.nc.Annotations = map[string]string{clusterv1beta1.AnnotationForceDelete: "true"}
				return f
			},
		},
		{
			name: "force-delete releases a cluster whose streams are unknown and whose trust is missing",
			fixture: func(t *testing.T) *fixture {
				f := deletingFixture(t)
				f.nc.Spec.Auth = &clusterv1beta1.AuthSpec{TrustRef: clusterv1beta1.LocalObjectReference{Name: "missing"}}
				f.nc.Annotations = map[string]string{clusterv1beta1.AnnotationForceDelete: ""}
				f.snap = &observe.Snapshot{Verdict: observe.Verdict{Status: metav1.ConditionUnknown, Reason: clusterv1beta1.ReasonObservationFailed, Message: "no server answered"}}
				return f
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.fixture(t)
			f.nc.Finalizers = append(f.nc.Finalizers, "example.com/other")
			acts := f.sync()
			// The finalizer goes and nothing else is written: no status for
			// a NatsCluster that goes.
			assertActions(t, acts, "patch natsclusters demo")
			if got, ok := patchedFinalizers(t, acts); !ok || strings.Join(got, ",") != "example.com/other" {
				t.Errorf("patched finalizers %v (patched %v), want only example.com/other left", got, ok)
			}
			if ev := events(f.recorder); len(ev) != 1 || !strings.HasPrefix(ev[0], "Normal "+clusterv1beta1.ReasonDeleting+" ") {
				t.Errorf("events %v, want one Normal Deleting", ev)
			}
		})
	}
}

func TestSyncLeavesADeletedClusterWithoutItsFinalizerAlone(t *testing.T) {
	f := deletingFixture(t, "ORDERS")
	f.nc.Finalizers = []string{"example.com/other"}
	assertActions(t, f.sync())
}
