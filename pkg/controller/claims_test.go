package controller

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	core "k8s.io/client-go/testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// grownFixture: a 3-server cluster running on 1Gi claims of class, whose
// spec now asks for 2Gi; each claim reports capacity (1Gi or 2Gi).
func grownFixture(t *testing.T, class string, expands bool, capacity func(i int) string) *fixture {
	t.Helper()
	old := rt.NewCluster("ns", "demo", rt.Claim("1Gi", class))
	secret, err := newSystemUserSecret(old)
	if err != nil {
		t.Fatal(err)
	}
	out := withSystemUser(t, old, secret)
	nc := rt.NewCluster("ns", "demo", rt.Claim("2Gi", class))
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: out.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	objs := append(running(t, out), secret,
		&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "example.com/csi", AllowVolumeExpansion: &expands})
	for i := range 3 {
		size := capacity(i)
		objs = append(objs, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: claimName(nc, int32(i)), UID: "claim-uid", Labels: render.ServerLabels("demo", int32(i))},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		})
	}
	f := newFixture(t, nc, objs...)
	f.snap = reportingOwn(out)
	// JetStream's meta group: demo-0 leads, every server a current member.
	f.snap.MetaLeader = "demo-0"
	meta := observe.Group{Kind: observe.GroupMeta, Leader: "demo-0"}
	for i := range f.snap.Servers {
		f.snap.Servers[i].MetaMembers = []string{"demo-0", "demo-1", "demo-2"}
		meta.Members = append(meta.Members, observe.Member{Name: f.snap.Servers[i].Name, Current: true})
	}
	f.snap.Groups = append(f.snap.Groups, meta)
	return f
}

// On a class that allows expansion, the highest server's claim gets the new
// request; no StatefulSet or pod is written.
func TestSyncGrowsTheHighestClaimFirst(t *testing.T) {
	f := grownFixture(t, "expandable", true, func(int) string { return "1Gi" })
	acts := writes(f.sync())
	assertActions(t, acts, "patch persistentvolumeclaims data-demo-2-0", "update natsclusters/status demo")
	if p := string(acts[0].(core.PatchAction).GetPatch()); !strings.Contains(p, `"storage":"2Gi"`) || !strings.Contains(p, `"uid":"claim-uid"`) {
		t.Errorf("patch %s, want the 2Gi request with the claim's UID as a precondition", p)
	}
	if c := conditionIn(writtenStatus(acts), clusterv1beta1.ConditionProgressing); c.Reason != clusterv1beta1.ReasonExpandingStorage {
		t.Errorf("Progressing %s %q, want ExpandingStorage", c.Reason, c.Message)
	}
}

// Claims already grown leave nothing to do but the raised max_file_store.
func TestSyncTakesGrownClaimsAsDone(t *testing.T) {
	f := grownFixture(t, "expandable", true, func(int) string { return "2Gi" })
	acts := writes(f.sync())
	for _, a := range describe(acts) {
		if strings.Contains(a, "persistentvolumeclaims") || strings.Contains(a, "patch statefulsets") {
			t.Errorf("action %s: grown claims need no claim step", a)
		}
	}
	if c := conditionIn(writtenStatus(acts), clusterv1beta1.ConditionProgressing); c.Reason == clusterv1beta1.ReasonExpandingStorage || c.Reason == clusterv1beta1.ReasonReplacingServer {
		t.Errorf("Progressing %s %q for grown claims", c.Reason, c.Message)
	}
}

// On a class that cannot expand, the highest server is replaced: stopped
// first (it holds no replicas), its claim untouched.
func TestSyncReplacesAServerWhoseClassCannotExpand(t *testing.T) {
	f := grownFixture(t, "fixed", false, func(int) string { return "1Gi" })
	acts := writes(f.sync())
	assertActions(t, acts, "patch statefulsets demo-2", "update natsclusters/status demo")
	st := writtenStatus(acts)
	if len(st.Status.Removals) != 1 || st.Status.Removals[0] != (clusterv1beta1.ServerRemoval{Server: "demo-2", Phase: clusterv1beta1.RemovalStopping, Replace: true}) {
		t.Errorf("status.removals %+v, want demo-2 Stopping (replace)", st.Status.Removals)
	}
}

// writes leaves out the GETs of claims and storage classes.
func writes(acts []core.Action) []core.Action {
	var out []core.Action
	for _, a := range acts {
		if a.GetVerb() != "get" {
			out = append(out, a)
		}
	}
	return out
}

// conditionIn is a condition of a written NatsCluster (zero when absent).
func conditionIn(nc *clusterv1beta1.NatsCluster, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(nc.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// A StatefulSet whose claim templates carry apiVersion and kind (as the API
// server returns them, and as the informers of the namespaced install with
// two or more namespaces cached them: every new JetStream server was
// replaced right after creation) is the same server: the sync writes
// nothing, replaces nothing, restarts nothing.
func TestClaimTemplatesWithAPIVersionAndKindAreTheSame(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.JetStream(), rt.Claim("1Gi", ""))
	out := mustRender(t, nc)
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: out.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	objs := running(t, out)
	for _, o := range objs {
		if sts, ok := o.(*appsv1.StatefulSet); ok {
			for i := range sts.Spec.VolumeClaimTemplates {
				sts.Spec.VolumeClaimTemplates[i].TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}
			}
		}
	}
	f := newFixture(t, nc, objs...)
	f.snap = settled(out, out.Revision)
	first := f.sync()
	assertActions(t, first, "update natsclusters/status demo")
	st := writtenStatus(first)
	if c := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing); c == nil || c.Reason != clusterv1beta1.ReasonUpToDate {
		t.Errorf("Progressing %+v, want UpToDate", c)
	}
	f.nc = st
	assertActions(t, f.sync())
}
