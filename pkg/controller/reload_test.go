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

// taggedCluster is the example cluster without auth running its system
// user (secret), rendered before (outOld) and after (outNew) other server
// tags, which reload; nc has the tags in its spec and outOld's revision in
// its status.
func taggedCluster(t *testing.T) (nc *clusterv1beta1.NatsCluster, secret runtime.Object, outOld, outNew *render.Output) {
	t.Helper()
	old := rt.NewCluster("ns", "demo")
	secret, err := newSystemUserSecret(old)
	if err != nil {
		t.Fatal(err)
	}
	outOld = withSystemUser(t, old, secret)
	nc = rt.NewCluster("ns", "demo", rt.ServerTag("az", "a"))
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: outOld.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	return nc, secret, outOld, withSystemUser(t, nc, secret)
}

// A cluster without auth running its system user, with other server tags in
// its spec: the sync reloads the server the planner names (demo-2): it
// records the reload on its StatefulSet, then writes its ConfigMap, and
// restarts nothing (the fake observer cannot reach $SYS, so the request is
// left for the next sync).
func TestSyncStartsAReloadBeforeWritingTheConfigMap(t *testing.T) {
	nc, secret, outOld, outNew := taggedCluster(t)
	f := newFixture(t, nc, append(running(t, outOld), secret)...)
	f.snap = reportingOwn(outOld)
	acts := f.sync()
	assertActions(t, acts, "patch statefulsets demo-2", "update configmaps demo-2-config",
		"update configmaps demo-1-config", "update configmaps demo-0-config", "update natsclusters/status demo")
	patch := string(acts[0].(core.PatchAction).GetPatch())
	if !strings.Contains(patch, clusterv1beta1.AnnotationReload) || !strings.Contains(patch, " Started ") {
		t.Errorf("StatefulSet patch %s, want the reload annotation Started", patch)
	}
	if cm := acts[1].(core.UpdateAction).GetObject().(*corev1.ConfigMap); cm.Annotations[clusterv1beta1.AnnotationStagedFrom] != "" {
		t.Errorf("the reloaded server's ConfigMap carries %s; it runs what the ConfigMap holds", clusterv1beta1.AnnotationStagedFrom)
	}
	// The servers that reload next are staged: their ConfigMaps hold the
	// target, and keep what they run.
	for i, a := range acts[2:4] {
		cm := a.(core.UpdateAction).GetObject().(*corev1.ConfigMap)
		ord := 1 - i
		if got, want := cm.Data[render.ConfigKey], outNew.Servers[ord].ConfigMap.Data[render.ConfigKey]; got != want {
			t.Errorf("staged %s holds %q, want the target %q", cm.Name, got, want)
		}
		if got, want := cm.Annotations[clusterv1beta1.AnnotationStagedFrom], outOld.Servers[ord].ConfigMap.Data[render.ConfigKey]; got != want {
			t.Errorf("staged %s keeps %q as what it runs, want %q", cm.Name, got, want)
		}
	}
	st := writtenStatus(acts)
	if p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing); p == nil || p.Reason != clusterv1beta1.ReasonReloading || p.Message != "reloading demo-2 (1 of 3)" {
		t.Errorf("Progressing %+v, want Reloading: reloading demo-2 (1 of 3)", p)
	}
}

// A staged server is read as running the config its ConfigMap's
// annotation keeps: after demo-2's reload is Done, demo-1 (staged) is
// reloaded next, its ConfigMap written again without the annotation, and
// nothing is staged again.
func TestSyncReloadsAStagedServerFromWhatItRuns(t *testing.T) {
	nc, secret, outOld, outNew := taggedCluster(t)
	objs := running(t, outOld)
	for i, o := range objs {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			if o.Name == "demo-2" {
				o.Annotations[clusterv1beta1.AnnotationReload] = formatReload(outNew.Servers[2].Revision, rollout.ReloadDone, time.Now(), "")
			}
		case *corev1.ConfigMap:
			ord := map[string]int{"demo-0-config": 0, "demo-1-config": 1, "demo-2-config": 2}[o.Name]
			cm := outNew.Servers[ord].ConfigMap.DeepCopy()
			if ord < 2 {
				if cm.Annotations == nil {
					cm.Annotations = map[string]string{}
				}
				cm.Annotations[clusterv1beta1.AnnotationStagedFrom] = o.Data[render.ConfigKey]
			}
			objs[i] = cm
		}
	}
	f := newFixture(t, nc, append(objs, secret)...)
	f.snap = reportingOwn(outOld)
	f.snap.Servers[2].ConfigRevision = outNew.Servers[2].Revision
	acts := f.sync()
	assertActions(t, acts, "patch statefulsets demo-1", "update configmaps demo-1-config", "update natsclusters/status demo")
	if cm := acts[1].(core.UpdateAction).GetObject().(*corev1.ConfigMap); cm.Annotations[clusterv1beta1.AnnotationStagedFrom] != "" {
		t.Errorf("demo-1's ConfigMap still carries %s after its own Reload step", clusterv1beta1.AnnotationStagedFrom)
	}
	st := writtenStatus(acts)
	if p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing); p == nil || p.Reason != clusterv1beta1.ReasonReloading || p.Message != "reloading demo-1 (2 of 3)" {
		t.Errorf("Progressing %+v, want Reloading: reloading demo-1 (2 of 3)", p)
	}
}

// Once the reloaded server reports its target revision, the sync records
// the reload Done (a metadata patch) and emits ServerReloaded; nothing else
// is written to the server.
func TestSyncRecordsAConfirmedReloadDone(t *testing.T) {
	nc, secret, outOld, outNew := taggedCluster(t)
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

// A reload request is resent after reloadFirstResend, then at doubling
// gaps up to reloadResendEvery; untilDue says when; a removal's pacer (no
// first gap) resends every reloadResendEvery.
func TestPacerBacksOffFromTheFirstResend(t *testing.T) {
	p := &pacer{first: reloadFirstResend}
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	now := at
	var sends []time.Duration
	for now.Sub(at) < 20*time.Second {
		if p.due("ns/demo/demo-2/rev", now) {
			sends = append(sends, now.Sub(at))
			if d := p.untilDue("ns/demo/demo-2/rev", now); d <= 0 || d > reloadResendEvery {
				t.Fatalf("untilDue right after a send = %s, want within (0, %s]", d, reloadResendEvery)
			}
		}
		now = now.Add(50 * time.Millisecond)
	}
	want := []time.Duration{0, 250 * time.Millisecond, 750 * time.Millisecond, 1750 * time.Millisecond,
		3750 * time.Millisecond, 7750 * time.Millisecond, 12750 * time.Millisecond, 17750 * time.Millisecond}
	if !slices.Equal(sends, want) {
		t.Errorf("sends at %v, want %v", sends, want)
	}
	flat := &pacer{}
	if !flat.due("k", at) || flat.due("k", at.Add(reloadResendEvery-time.Millisecond)) || !flat.due("k", at.Add(reloadResendEvery)) {
		t.Error("the zero pacer does not resend every reloadResendEvery")
	}
	if d := (&pacer{}).untilDue("never-sent", at); d != 0 {
		t.Errorf("untilDue of a key never sent = %s, want 0", d)
	}
}
