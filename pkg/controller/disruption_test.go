package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// budgetAllowing is the cluster's PodDisruptionBudget (out's) with the
// status the disruption controller writes for n servers of which healthy
// are Ready, allowing allowed disruptions.
func budgetAllowing(out *render.Output, n, healthy, allowed int32) *policyv1.PodDisruptionBudget {
	pdb := out.PDB.DeepCopy()
	pdb.Generation = 1
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, ExpectedPods: n, CurrentHealthy: healthy, DesiredHealthy: n - 1, DisruptionsAllowed: allowed}
	return pdb
}

// granted marks pods as evicted by the eviction API in a budget's status
// (DisruptedPods), as it does before the pods' deletion.
func granted(pdb *policyv1.PodDisruptionBudget, pods ...string) *policyv1.PodDisruptionBudget {
	pdb.Status.DisruptedPods = map[string]metav1.Time{}
	for _, p := range pods {
		pdb.Status.DisruptedPods[p] = metav1.Now()
	}
	return pdb
}

// A restart step reads the PodDisruptionBudget first, from the cache as it
// is when the step is written. Refused — a drain evicts another server after
// the observation, and the budget's status names it — nothing is
// written: Progressing stays RollingRestart with the budget's words, and
// the next sync, the budget allowing it again, takes the step. The eviction
// API is never asked.
func TestARestartTheDisruptionBudgetRefusesWaits(t *testing.T) {
	nc, secret, outOld, _ := memoryChange(t)
	objs := running(t, outOld)
	for i, o := range objs {
		if _, ok := o.(*policyv1.PodDisruptionBudget); ok {
			objs[i] = granted(budgetAllowing(outOld, 3, 3, 0), "demo-1-0")
		}
	}
	f := newFixture(t, nc, append(objs, secret)...)
	f.snap = settled(outOld, outOld.Revision)
	acts := f.sync()
	if diff := cmp.Diff([]string{"update natsclusters/status demo"}, describe(acts)); diff != "" {
		t.Errorf("writes while the budget refuses (-want +got):\n%s", diff)
	}
	for _, a := range f.kube.Actions() {
		if a.GetSubresource() == "eviction" {
			t.Errorf("the eviction API was asked: %v", a)
		}
	}
	st := writtenStatus(acts)
	p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing)
	if p == nil || p.Status != metav1.ConditionTrue || p.Reason != clusterv1beta1.ReasonRollingRestart {
		t.Fatalf("Progressing = %+v, want True RollingRestart", p)
	}
	for _, want := range []string{"before restarting demo-2: waiting, the PodDisruptionBudget allows no disruption now",
		"the pod's disruption budget demo granted the eviction of demo-1-0"} {
		if !strings.Contains(p.Message, want) {
			t.Errorf("Progressing does not say %q: %s", want, p.Message)
		}
	}
	if ev := events(f.recorder); len(ev) > 0 && strings.Contains(strings.Join(ev, "\n"), clusterv1beta1.EventServerRestarted) {
		t.Errorf("a ServerRestarted Event for a step not taken: %v", ev)
	}

	for i, o := range f.kubeObjects {
		if _, ok := o.(*policyv1.PodDisruptionBudget); ok {
			f.kubeObjects[i] = budgetAllowing(outOld, 3, 3, 1)
		}
	}
	f.nc = st
	acts = f.sync()
	want := []string{"update statefulsets demo-2", "update configmaps demo-2-config", "delete pods demo-2-0", "update natsclusters/status demo"}
	if diff := cmp.Diff(want, describe(acts)); diff != "" {
		t.Errorf("writes once the budget allows it (-want +got):\n%s", diff)
	}
}

// The budget check (disruptionAllowed) refuses when another server is down
// in the cache (gone, being deleted, not Ready: seen before the budget's
// status counts it), when the budget's status names an eviction it granted,
// is older than its spec, or allows no disruption while it counts as many
// healthy pods as the cache (a status behind a pod that became Ready is
// not waited for). A pod already gone, being deleted or not Ready is not the
// budget's to guard.
func TestDisruptionAllowedReadsTheBudgetAndThePods(t *testing.T) {
	out := mustRender(t, rt.NewCluster("nats", "demo"))
	ready := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "nats", Name: name}, Status: corev1.PodStatus{
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	notReady := func(name string) *corev1.Pod {
		p := ready(name)
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		return p
	}
	deleting := func(name string) *corev1.Pod {
		p := ready(name)
		now := metav1.Now()
		p.DeletionTimestamp = &now
		return p
	}
	pods := func(p0, p1, p2 *corev1.Pod) map[string]*corev1.Pod {
		return map[string]*corev1.Pod{"demo-0": p0, "demo-1": p1, "demo-2": p2}
	}
	stale := budgetAllowing(out, 3, 3, 1)
	stale.Generation = 2
	for _, tc := range []struct {
		name  string
		view  budgetView
		words string // "" when allowed
	}{
		{name: "every server up, the budget allows one", view: budgetView{budgetAllowing(out, 3, 3, 1), pods(ready("demo-0-0"), ready("demo-1-0"), ready("demo-2-0"))}},
		{name: "no budget, every server up", view: budgetView{nil, pods(ready("demo-0-0"), ready("demo-1-0"), ready("demo-2-0"))}},
		{name: "another server being deleted (an eviction the budget's status does not count yet)",
			view:  budgetView{budgetAllowing(out, 3, 3, 1), pods(ready("demo-0-0"), deleting("demo-1-0"), ready("demo-2-0"))},
			words: "the pod's disruption budget allows one server down at a time: demo-1-0 is being deleted"},
		{name: "two others down", view: budgetView{budgetAllowing(out, 3, 3, 1), pods(ready("demo-0-0"), notReady("demo-1-0"), nil)},
			words: "demo-1-0 is not Ready, demo-2 has no pod"},
		{name: "the budget's status allows none while it counts every pod healthy", view: budgetView{budgetAllowing(out, 3, 3, 0), pods(ready("demo-0-0"), ready("demo-1-0"), ready("demo-2-0"))},
			words: "the pod's disruption budget demo needs 2 healthy pods and has 3 currently"},
		{name: "the budget's status behind a pod that became Ready: the pods' own count", view: budgetView{budgetAllowing(out, 3, 2, 0), pods(ready("demo-0-0"), ready("demo-1-0"), ready("demo-2-0"))}},
		{name: "the budget's status behind, another server not Ready", view: budgetView{budgetAllowing(out, 3, 1, 0), pods(ready("demo-0-0"), notReady("demo-1-0"), ready("demo-2-0"))},
			words: "demo-1-0 is not Ready"},
		{name: "an eviction the budget granted, its pod not being deleted yet", view: budgetView{granted(budgetAllowing(out, 3, 3, 0), "demo-1-0"), pods(ready("demo-0-0"), ready("demo-1-0"), ready("demo-2-0"))},
			words: "the pod's disruption budget demo granted the eviction of demo-1-0"},
		{name: "an eviction granted of the stepped server's own pod", view: budgetView{granted(budgetAllowing(out, 3, 3, 1), "demo-0-0"), pods(ready("demo-0-0"), ready("demo-1-0"), ready("demo-2-0"))}},
		{name: "the budget's status older than its spec", view: budgetView{stale, pods(ready("demo-0-0"), ready("demo-1-0"), ready("demo-2-0"))},
			words: "is older than its spec (generation 2, status of 1)"},
		{name: "the stepped server already down: not the budget's", view: budgetView{budgetAllowing(out, 3, 2, 0), pods(notReady("demo-0-0"), notReady("demo-1-0"), ready("demo-2-0"))}},
		{name: "the stepped server being deleted", view: budgetView{budgetAllowing(out, 3, 2, 0), pods(deleting("demo-0-0"), notReady("demo-1-0"), ready("demo-2-0"))}},
		{name: "the stepped server without a pod", view: budgetView{budgetAllowing(out, 3, 2, 0), pods(nil, notReady("demo-1-0"), ready("demo-2-0"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := disruptionAllowed("demo-0", tc.view)
			if tc.words == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var wait *disruptionWaitError
			if !errors.As(err, &wait) {
				t.Fatalf("got %v, want a wait saying %q", err, tc.words)
			}
			if !strings.Contains(err.Error(), "before restarting demo-0: waiting") || !strings.Contains(err.Error(), tc.words) {
				t.Errorf("the wait says %q, want %q", err, tc.words)
			}
		})
	}
}
