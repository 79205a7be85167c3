package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// withSystemUser renders nc with the system user of secret.
func withSystemUser(t *testing.T, nc *clusterv1beta1.NatsCluster, secret runtime.Object) *render.Output {
	t.Helper()
	_, _, ru, err := systemUserFromSecret(secret.(*corev1.Secret))
	if err != nil {
		t.Fatal(err)
	}
	out, err := render.Render(render.Input{Cluster: nc, SystemUser: ru})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reportingOwn is a settled Snapshot of every server answering on its own
// revision in out.
func reportingOwn(out *render.Output) *observe.Snapshot {
	snap := settled(out, "")
	for i := range snap.Servers {
		snap.Servers[i].ConfigRevision = out.Servers[i].Revision
	}
	return snap
}

// A cluster without auth running its system user, with other server tags in
// its spec: the sync reloads the server the planner names (demo-2): it
// records the reload on its StatefulSet, then writes its ConfigMap, and
// restarts nothing (the fake observer cannot reach $SYS, so the request is
// left for the next sync).
func TestSyncStartsAReloadBeforeWritingTheConfigMap(t *testing.T) {
	old := rt.NewCluster("ns", "demo")
	secret, err := newSystemUserSecret(old)
	if err != nil {
		t.Fatal(err)
	}
	outOld := withSystemUser(t, old, secret)
	nc := rt.NewCluster("ns", "demo", rt.ServerTag("az", "a"))
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: outOld.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	f := newFixture(t, nc, append(running(t, outOld), secret)...)
	f.snap = reportingOwn(outOld)
	acts := f.sync()
	assertActions(t, acts, "patch statefulsets demo-2", "update configmaps demo-2-config", "update natsclusters/status demo")
	patch := string(acts[0].(core.PatchAction).GetPatch())
	if !strings.Contains(patch, clusterv1beta1.AnnotationReload) || !strings.Contains(patch, " Started ") {
		t.Errorf("StatefulSet patch %s, want the reload annotation Started", patch)
	}
	st := writtenStatus(acts)
	if p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing); p == nil || p.Reason != clusterv1beta1.ReasonReloading || p.Message != "reloading demo-2 (1 of 3)" {
		t.Errorf("Progressing %+v, want Reloading: reloading demo-2 (1 of 3)", p)
	}
}

// Once the reloaded server reports its target revision, the sync records
// the reload Done (a metadata patch) and emits ServerReloaded; nothing else
// is written to the server.
func TestSyncRecordsAConfirmedReloadDone(t *testing.T) {
	old := rt.NewCluster("ns", "demo")
	secret, err := newSystemUserSecret(old)
	if err != nil {
		t.Fatal(err)
	}
	outOld := withSystemUser(t, old, secret)
	nc := rt.NewCluster("ns", "demo", rt.ServerTag("az", "a"))
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: outOld.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	outNew := withSystemUser(t, nc, secret)
	objs := running(t, outOld)
	for i, o := range objs {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			if o.Name == "demo-2" {
				o.Annotations[clusterv1beta1.AnnotationReload] = formatReload(outNew.Servers[2].Revision, rollout.ReloadStarted, time.Now(), "")
			}
		default:
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == "demo-2-config" {
				objs[i] = outNew.Servers[2].ConfigMap.DeepCopy()
			}
		}
	}
	f := newFixture(t, nc, append(objs, secret)...)
	f.snap = reportingOwn(outOld)
	f.snap.Servers[2].ConfigRevision = outNew.Servers[2].Revision
	acts := f.sync()
	assertActions(t, acts, "patch statefulsets demo-2", "update natsclusters/status demo")
	if patch := string(acts[0].(core.PatchAction).GetPatch()); !strings.Contains(patch, " Done ") {
		t.Errorf("StatefulSet patch %s, want the reload annotation Done", patch)
	}
	if ev := events(f.recorder); !slices.ContainsFunc(ev, func(e string) bool {
		return strings.Contains(e, clusterv1beta1.EventServerReloaded+" Reloaded demo-2 onto revision "+outNew.Servers[2].Revision)
	}) {
		t.Errorf("events %v, want ServerReloaded for demo-2", ev)
	}
}

// The reload annotation reads back as written, and anything else reads as
// no reload.
func TestReloadAnnotationRoundTrips(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		v    string
		want rollout.ServerReload
	}{
		{"a started reload", formatReload("abc", rollout.ReloadStarted, at, ""), rollout.ServerReload{Revision: "abc", Phase: rollout.ReloadStarted, Since: metav1.NewTime(at)}},
		{"a refusal with nats-server's words", formatReload("abc", rollout.ReloadRefused, at, "config reload not supported for X"),
			rollout.ServerReload{Revision: "abc", Phase: rollout.ReloadRefused, Since: metav1.NewTime(at), Message: "config reload not supported for X"}},
		{"an unknown phase", "abc Maybe 2026-12-01T12:00:00Z", rollout.ServerReload{}},
		{"no time", "abc Done", rollout.ServerReload{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sts := &appsv1.StatefulSet{}
			sts.Annotations = map[string]string{clusterv1beta1.AnnotationReload: tt.v}
			if got := parseReload(&sts.ObjectMeta); got != tt.want {
				t.Errorf("parseReload(%q) = %+v, want %+v", tt.v, got, tt.want)
			}
		})
	}
}

// status.systemAccess names whose user reaches $SYS and lists every
// operation that enables, or none with the reason and what is held.
func TestSystemAccessStatus(t *testing.T) {
	noAuth := rt.NewCluster("ns", "demo")
	withAuth := rt.NewCluster("ns", "demo")
	withAuth.Spec.Auth = &clusterv1beta1.AuthSpec{}
	all := clusterv1beta1.SystemOperations
	for _, c := range []struct {
		name string
		f    facts
		in   rollout.Input
		via  clusterv1beta1.SystemAccessVia
		ops  []clusterv1beta1.SystemOperation
		msg  string
	}{
		{"without auth", facts{nc: noAuth}, rollout.Input{CanReload: true}, clusterv1beta1.SystemAccessControllerUser, all, ""},
		{"without auth, not run yet", facts{nc: noAuth}, rollout.Input{NoReload: "reloads need the controller's system user on a running server"},
			clusterv1beta1.SystemAccessControllerUser, nil, "reloads need the controller's system user on a running server; until then config changes restart the servers, and scale-down and replace-server hold"},
		{"systemCredentials", facts{nc: withAuth, systemCreds: []byte("creds")}, rollout.Input{CanReload: true}, clusterv1beta1.SystemAccessSystemCredentials, all, ""},
		{"minted", facts{nc: withAuth, systemCreds: []byte("creds"), systemCredsMinted: true}, rollout.Input{CanReload: true}, clusterv1beta1.SystemAccessMintedUser, all, ""},
		{"none", facts{nc: withAuth}, rollout.Input{NoReload: "reloads need spec.auth.systemCredentials"}, clusterv1beta1.SystemAccessNone, nil,
			"reloads need spec.auth.systemCredentials; until then config changes restart the servers, and scale-down and replace-server hold"},
	} {
		got := systemAccessStatus(&c.f, c.in)
		if got.Via != c.via || !slices.Equal(got.Operations, c.ops) || got.Message != c.msg {
			t.Errorf("%s: %+v, want via %s operations %v message %q", c.name, got, c.via, c.ops, c.msg)
		}
	}
}
