package controller

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// scaledDownFixture is a 3-server cluster without JetStream whose demo-3 is
// still running from a 4-server render, with the system user, observed
// settled; demo3 edits the objects, snap the Snapshot.
func scaledDownFixture(t *testing.T, demo3 func(objs []runtime.Object) []runtime.Object, snap func(*observe.Snapshot)) *fixture {
	t.Helper()
	four := rt.NewCluster("ns", "demo", rt.Replicas(4))
	secret, err := newSystemUserSecret(four)
	if err != nil {
		t.Fatal(err)
	}
	out := withSystemUser(t, four, secret)
	nc := rt.NewCluster("ns", "demo", rt.Replicas(3))
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: out.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	objs := demo3(running(t, out))
	f := newFixture(t, nc, append(objs, secret)...)
	f.snap = reportingOwn(out)
	if snap != nil {
		snap(f.snap)
	}
	return f
}

// A running server beyond spec.replicas that holds no replicas and does not
// lead is stopped: its StatefulSet scaled to 0, nothing else written.
func TestSyncStopsAServerBeyondTheReplicas(t *testing.T) {
	f := scaledDownFixture(t, func(objs []runtime.Object) []runtime.Object { return objs }, nil)
	acts := f.sync()
	assertActions(t, acts, "patch statefulsets demo-3", "update natsclusters/status demo")
	if p := string(acts[0].(core.PatchAction).GetPatch()); p != `{"spec":{"replicas":0}}` {
		t.Errorf("patch %s, want replicas 0", p)
	}
	st := writtenStatus(acts)
	if len(st.Status.Removals) != 1 || st.Status.Removals[0] != (clusterv1beta1.ServerRemoval{Server: "demo-3", Phase: clusterv1beta1.RemovalStopping}) {
		t.Errorf("status.removals %+v, want demo-3 Stopping", st.Status.Removals)
	}
}

// A stopped server beyond spec.replicas that the meta group no longer lists
// has its ConfigMap and claim deleted, then its StatefulSet.
func TestSyncDeletesARemovedServersObjectsStatefulSetLast(t *testing.T) {
	f := scaledDownFixture(t, func(objs []runtime.Object) []runtime.Object {
		var out []runtime.Object
		for _, o := range objs {
			switch o := o.(type) {
			case *appsv1.StatefulSet:
				if o.Name == "demo-3" {
					zero := int32(0)
					o.Spec.Replicas = &zero
				}
			case *corev1.Pod:
				if o.Name == "demo-3-0" {
					continue
				}
			}
			out = append(out, o)
		}
		claim := &corev1.PersistentVolumeClaim{}
		claim.Namespace, claim.Name, claim.UID = "ns", "data-demo-3-0", "uid-claim"
		claim.Labels = render.ServerLabels("demo", 3)
		return append(out, claim)
	}, func(s *observe.Snapshot) {
		s.MetaLeader = "demo-0"
		for i := range s.Servers {
			if s.Servers[i].Name == "demo-0" {
				s.Servers[i].MetaMembers = []string{"demo-0", "demo-1", "demo-2"}
			}
		}
	})
	acts := f.sync()
	var got []string
	for _, d := range describe(acts) {
		if !strings.HasPrefix(d, "get ") {
			got = append(got, d)
		}
	}
	want := []string{"delete configmaps demo-3-config", "delete persistentvolumeclaims data-demo-3-0", "delete statefulsets demo-3", "update natsclusters/status demo"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("actions:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
