package controller

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	core "k8s.io/client-go/testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

func TestWriteErrorsTellRefusalsFromTransientFailures(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "statefulsets"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "nats", Name: "demo-0-config"}}
	for _, tc := range []struct {
		name    string
		err     error
		refused bool
	}{
		{"an invalid object is refused", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "StatefulSet"}, "demo-0", field.ErrorList{field.Required(field.NewPath("spec"), "x")}), true},
		{"an admission denial is refused", apierrors.NewForbidden(gr, "demo-0", errors.New("denied by policy")), true},
		{"a bad request is refused", apierrors.NewBadRequest("bad"), true},
		{"a conflict is transient", apierrors.NewConflict(gr, "demo-0", errors.New("modified")), false},
		{"a server timeout is transient", apierrors.NewServerTimeout(gr, "create", 1), false},
		{"an unavailable API server is transient", apierrors.NewServiceUnavailable("down"), false},
		{"too many requests is transient", apierrors.NewTooManyRequests("slow down", 1), false},
		{"a connection error is transient", errors.New("dial tcp: connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := writeError("creating", "ConfigMap", cm, tc.err)
			var wre *writeRefusedError
			if got := errors.As(err, &wre); got != tc.refused {
				t.Fatalf("refused = %v, want %v: %v", got, tc.refused, err)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("%v does not wrap %v", err, tc.err)
			}
		})
	}
}

// policyMessage is the message of memoryCap's admission policy.
const policyMessage = "StatefulSets in this namespace may not ask for more than 2Gi of memory per container"

// policyDenial is the error the API server returns when a
// ValidatingAdmissionPolicy denies a write of StatefulSet name, as
// k8s.io/apiserver's validating policy dispatcher makes it: a Forbidden whose
// reason and code are those of the validation (Invalid, 422, when it names
// none), the policy's message also a cause.
func policyDenial(name string) *apierrors.StatusError {
	msg := "ValidatingAdmissionPolicy 'memory-cap' with binding 'memory-cap' denied request: " + policyMessage
	err := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, name, errors.New(msg))
	err.ErrStatus.Reason = metav1.StatusReasonInvalid
	err.ErrStatus.Code = http.StatusUnprocessableEntity
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Message: msg})
	return err
}

// memoryCap is, for the fake clientset, the admission policy of test/e2e's
// TestRefusedWriteIsReportedAndFixingItProceeds: the create or update of a
// StatefulSet whose containers ask for more than 2Gi of memory is refused
// with policyDenial; every other write goes on to the fake's tracker.
var memoryCap = kubeReactor{verb: "*", resource: "statefulsets", fn: func(a core.Action) (bool, runtime.Object, error) {
	var sts *appsv1.StatefulSet
	switch a := a.(type) {
	case core.CreateAction:
		sts, _ = a.GetObject().(*appsv1.StatefulSet)
	case core.UpdateAction:
		sts, _ = a.GetObject().(*appsv1.StatefulSet)
	}
	if sts == nil {
		return false, nil, nil
	}
	limit := resource.MustParse("2Gi")
	for _, c := range sts.Spec.Template.Spec.Containers {
		if m, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && m.Cmp(limit) > 0 {
			return true, nil, policyDenial(sts.Name)
		}
	}
	return false, nil, nil
}}

// A StatefulSet write the API server refuses (memoryCap) ends the sync's
// writes: Progressing=False ReconcileFailed with the API server's words, one
// Warning Event saying the same, and nothing after it written (no server
// created after a refused create, no pod deleted after a refused update).
// Once the spec asks for what the policy allows, the next sync, from the
// objects the first one left, takes the step.
// TestWriteErrorsTellRefusalsFromTransientFailures proves which errors are
// refusals; this proves what a sync does with one.
func TestARefusedWriteIsReportedWithTheAPIServersWordsAndFixingTheSpecProceeds(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fixture is a cluster whose spec asks for 4Gi.
		fixture func(t *testing.T) *fixture
		// refused is the StatefulSet whose write is refused.
		refused string
		// first and fixed are the writes of the sync refused and of the
		// sync after the spec is fixed; fixedProgressing and fixedEvents
		// the latter's Progressing reason and its Events' type and reason.
		first, fixed     []string
		fixedProgressing string
		fixedEvents      [][2]string
	}{
		{
			name: "creating a server",
			fixture: func(t *testing.T) *fixture {
				return newFixture(t, rt.NewCluster("nats", "demo", rt.MemoryLimit("4Gi")))
			},
			refused: "demo-0",
			// demo-1 and demo-2 are not attempted.
			first: []string{secrets, "create services demo", "create services demo-headless", "create poddisruptionbudgets demo", "create networkpolicies demo",
				"create configmaps demo-0-config", "create statefulsets demo-0", "update natsclusters/status demo"},
			// The ConfigMap the refused sync left is brought to the target
			// before its StatefulSet is created.
			fixed: []string{"update configmaps demo-0-config", "create statefulsets demo-0",
				"create configmaps demo-1-config", "create statefulsets demo-1",
				"create configmaps demo-2-config", "create statefulsets demo-2", "update natsclusters/status demo"},
			fixedProgressing: clusterv1beta1.ReasonCreating,
			fixedEvents:      [][2]string{{"Normal", clusterv1beta1.ReasonCreating}},
		},
		{
			name: "a step updating a server",
			fixture: func(t *testing.T) *fixture {
				old := rt.NewCluster("nats", "demo")
				secret, err := newSystemUserSecret(old)
				if err != nil {
					t.Fatal(err)
				}
				outOld := withSystemUser(t, old, secret)
				nc := rt.NewCluster("nats", "demo", rt.MemoryLimit("4Gi"))
				nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: outOld.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
				f := newFixture(t, nc, append(running(t, outOld), secret)...)
				f.snap = settled(outOld, outOld.Revision)
				return f
			},
			refused: "demo-2",
			// The step writes the template first (OnDelete: it restarts
			// nothing by itself): refused, not even the ConfigMap is
			// written, and no pod is deleted.
			first:            []string{"update statefulsets demo-2", "update natsclusters/status demo"},
			fixed:            []string{"update statefulsets demo-2", "update configmaps demo-2-config", "delete pods demo-2-0", "update natsclusters/status demo"},
			fixedProgressing: clusterv1beta1.ReasonRollingRestart,
			fixedEvents:      [][2]string{{"Normal", clusterv1beta1.EventServerRestarted}, {"Normal", clusterv1beta1.ReasonRollingRestart}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fixture(t)
			f.kubeReactors = []kubeReactor{memoryCap}
			acts := f.sync()
			if diff := cmp.Diff(expand(tc.first), describe(acts)); diff != "" {
				t.Errorf("writes of the refused sync (-want +got):\n%s", diff)
			}
			refused := writtenStatus(acts)
			if refused == nil {
				t.Fatal("no status written")
			}
			p := meta.FindStatusCondition(refused.Status.Conditions, clusterv1beta1.ConditionProgressing)
			if p == nil {
				t.Fatal("no Progressing condition written")
			}
			if diff := cmp.Diff(
				metav1.Condition{Type: clusterv1beta1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonReconcileFailed, ObservedGeneration: 1},
				metav1.Condition{Type: p.Type, Status: p.Status, Reason: p.Reason, ObservedGeneration: p.ObservedGeneration},
			); diff != "" {
				t.Errorf("Progressing (-want +got):\n%s", diff)
			}
			for _, want := range []string{"StatefulSet nats/" + tc.refused + " ", policyDenial(tc.refused).Error()} {
				if !strings.Contains(p.Message, want) {
					t.Errorf("the Progressing message does not carry %q: %s", want, p.Message)
				}
			}
			if diff := cmp.Diff([]string{"Warning " + clusterv1beta1.ReasonReconcileFailed + " " + p.Message}, events(f.recorder)); diff != "" {
				t.Errorf("Events (-want +got):\n%s", diff)
			}

			// The fix: a memory limit the policy allows.
			f.keepObjects()
			fixed := refused.DeepCopy()
			rt.MemoryLimit("1Gi")(fixed)
			fixed.Generation++
			f.nc = fixed
			acts = f.sync()
			if diff := cmp.Diff(expand(tc.fixed), describe(acts)); diff != "" {
				t.Errorf("writes of the sync after the fix (-want +got):\n%s", diff)
			}
			st := writtenStatus(acts)
			if st == nil {
				t.Fatal("no status written after the fix")
			}
			p = meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing)
			if p == nil {
				t.Fatal("no Progressing condition written")
			}
			if diff := cmp.Diff(
				metav1.Condition{Type: clusterv1beta1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: tc.fixedProgressing, ObservedGeneration: 2},
				metav1.Condition{Type: p.Type, Status: p.Status, Reason: p.Reason, ObservedGeneration: p.ObservedGeneration},
			); diff != "" {
				t.Errorf("Progressing after the fix (-want +got):\n%s", diff)
			}
			// The Event of the hold ending, with the reason that follows it.
			var got [][2]string
			for _, e := range events(f.recorder) {
				typ, rest, _ := strings.Cut(e, " ")
				reason, msg, _ := strings.Cut(rest, " ")
				got = append(got, [2]string{typ, reason})
				if reason == tc.fixedProgressing && !strings.HasPrefix(msg, clusterv1beta1.ReasonReconcileFailed+" ended: ") {
					t.Errorf("the %s Event does not say ReconcileFailed ended: %s", reason, msg)
				}
			}
			if diff := cmp.Diff(tc.fixedEvents, got); diff != "" {
				t.Errorf("Events after the fix (type, reason) (-want +got):\n%s", diff)
			}
		})
	}
}

// webhookTimeout is the error the API server returns when a validating
// webhook of NetworkPolicies does not answer in time.
var webhookTimeout = apierrors.NewInternalError(errors.New(`failed calling webhook "policy.example.com": failed to call webhook: Post "https://policy.example.svc:443/validate?timeout=10s": context deadline exceeded`))

// A supporting object the servers do not need (here the NetworkPolicy,
// whose create times out in a webhook) never stops a step: the version
// revert restarts its server in the same sync, and ObjectsWritten says
// False WriteFailed with the API server's words, with one Warning Event.
// Once the webhook answers, the next sync writes it and ObjectsWritten is
// True again.
func TestAFailingOptionalObjectIsReportedAndDoesNotStopTheStep(t *testing.T) {
	old := rt.NewCluster("nats", "demo", rt.Version("2.15.99"))
	secret, err := newSystemUserSecret(old)
	if err != nil {
		t.Fatal(err)
	}
	outOld := withSystemUser(t, old, secret)
	// The revert: back to 2.15.2.
	nc := rt.NewCluster("nats", "demo")
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: outOld.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	var objs []runtime.Object
	for _, o := range running(t, outOld) {
		if _, np := o.(*networkingv1.NetworkPolicy); !np {
			objs = append(objs, o)
		}
	}
	f := newFixture(t, nc, append(objs, secret)...)
	f.snap = settled(outOld, outOld.Revision)
	f.kubeReactors = []kubeReactor{{verb: "create", resource: "networkpolicies", fn: func(core.Action) (bool, runtime.Object, error) {
		return true, nil, webhookTimeout
	}}}
	acts := f.sync()
	want := []string{"create networkpolicies demo", "update statefulsets demo-2", "update configmaps demo-2-config", "delete pods demo-2-0", "update natsclusters/status demo"}
	if diff := cmp.Diff(want, describe(acts)); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	st := writtenStatus(acts)
	if st == nil {
		t.Fatal("no status written")
	}
	if p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing); p == nil || p.Reason != clusterv1beta1.ReasonRollingRestart {
		t.Errorf("Progressing = %+v, want RollingRestart", p)
	}
	ow := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionObjectsWritten)
	if ow == nil || ow.Status != metav1.ConditionFalse || ow.Reason != clusterv1beta1.ReasonWriteFailed {
		t.Fatalf("ObjectsWritten = %+v, want False WriteFailed", ow)
	}
	for _, w := range []string{"the NetworkPolicy: ", webhookTimeout.Error(), "the servers' rollout goes on"} {
		if !strings.Contains(ow.Message, w) {
			t.Errorf("ObjectsWritten's message does not carry %q: %s", w, ow.Message)
		}
	}
	var warnings []string
	for _, e := range events(f.recorder) {
		if strings.HasPrefix(e, "Warning ") {
			warnings = append(warnings, e)
		}
	}
	if diff := cmp.Diff([]string{"Warning " + clusterv1beta1.ReasonWriteFailed + " " + ow.Message}, warnings); diff != "" {
		t.Errorf("Warning Events (-want +got):\n%s", diff)
	}

	// The webhook answers again: the NetworkPolicy is created, and
	// ObjectsWritten is True.
	f.keepObjects()
	f.nc = st.DeepCopy()
	f.kubeReactors = nil
	acts = f.sync()
	if !slices.Contains(describe(acts), "create networkpolicies demo") {
		t.Errorf("the NetworkPolicy was not created once the webhook answered: %v", describe(acts))
	}
	st = writtenStatus(acts)
	if st == nil {
		t.Fatal("no status written after the webhook answered")
	}
	if ow := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionObjectsWritten); ow == nil || ow.Status != metav1.ConditionTrue {
		t.Errorf("ObjectsWritten = %+v, want True", ow)
	}
}
