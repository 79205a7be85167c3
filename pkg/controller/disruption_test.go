package controller

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// pdbRefusal is the API server's answer to an eviction the
// PodDisruptionBudget does not allow (k8s.io/kubernetes
// pkg/registry/core/pod/storage/eviction.go).
var pdbRefusal = func() *apierrors.StatusError {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Code = http.StatusTooManyRequests
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: "DisruptionBudget", Message: "The disruption budget demo needs 2 healthy pods and has 2 currently"}}
	return err
}()

// A restart step asks the PodDisruptionBudget first (an eviction in dry
// run of the server's pod). Refused — a drain took another server down
// after the observation — nothing is written: Progressing stays
// RollingRestart with the budget's words, and the next sync, the budget
// allowing it again, takes the step.
func TestARestartTheDisruptionBudgetRefusesWaits(t *testing.T) {
	old := rt.NewCluster("nats", "demo")
	secret, err := newSystemUserSecret(old)
	if err != nil {
		t.Fatal(err)
	}
	outOld := withSystemUser(t, old, secret)
	nc := rt.NewCluster("nats", "demo", rt.MemoryLimit("2Gi"))
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: outOld.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	f := newFixture(t, nc, append(running(t, outOld), secret)...)
	f.snap = settled(outOld, outOld.Revision)
	var asked []string
	refuse := true
	f.kubeReactors = []kubeReactor{{verb: "create", resource: "pods", fn: func(a core.Action) (bool, runtime.Object, error) {
		if !dryRunEviction(a) {
			return false, nil, nil
		}
		asked = append(asked, a.(core.CreateAction).GetObject().(metav1.Object).GetName())
		if refuse {
			return true, nil, pdbRefusal
		}
		return true, nil, nil
	}}}
	acts := f.sync()
	if diff := cmp.Diff([]string{"update natsclusters/status demo"}, describe(acts)); diff != "" {
		t.Errorf("writes while the budget refuses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"demo-2-0"}, asked); diff != "" {
		t.Errorf("dry-run evictions (-want +got):\n%s", diff)
	}
	st := writtenStatus(acts)
	p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing)
	if p == nil || p.Status != metav1.ConditionTrue || p.Reason != clusterv1beta1.ReasonRollingRestart {
		t.Fatalf("Progressing = %+v, want True RollingRestart", p)
	}
	for _, want := range []string{"before restarting demo-2: waiting, the PodDisruptionBudget allows no disruption now", pdbRefusal.Error()} {
		if !strings.Contains(p.Message, want) {
			t.Errorf("Progressing does not say %q: %s", want, p.Message)
		}
	}
	if ev := events(f.recorder); len(ev) > 0 && strings.Contains(strings.Join(ev, "\n"), clusterv1beta1.EventServerRestarted) {
		t.Errorf("a ServerRestarted Event for a step not taken: %v", ev)
	}

	refuse = false
	f.nc = st
	acts = f.sync()
	want := []string{"update configmaps demo-2-config", "update statefulsets demo-2", "delete pods demo-2-0", "update natsclusters/status demo"}
	if diff := cmp.Diff(want, describe(acts)); diff != "" {
		t.Errorf("writes once the budget allows it (-want +got):\n%s", diff)
	}
}

// Only the budget's refusal (429) is a wait: another failure of the
// eviction API is an error, retried; a pod already gone, or being deleted,
// needs no asking.
func TestDisruptionAllowedTellsARefusalFromAFailure(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "nats", Name: "demo-1-0", UID: "u1"}}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		err   error
		wait  bool
		fails bool
		calls int
	}{
		{name: "allowed", pod: pod, calls: 1},
		{name: "refused by the budget", pod: pod, err: pdbRefusal, wait: true, calls: 1},
		{name: "the API server failing", pod: pod, err: apierrors.NewInternalError(errors.New("etcd timeout")), fails: true, calls: 1},
		{name: "the pod already replaced", pod: pod, err: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "demo-1-0"), calls: 1},
		{name: "no pod", pod: nil},
		{name: "a webhook that does not support dry run: the check cannot be made, the step goes", pod: pod,
			err: apierrors.NewBadRequest(`admission webhook "audit.example.com" does not support dry run`), calls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := k8sfake.NewClientset()
			calls := 0
			kube.PrependReactor("create", "pods", func(a core.Action) (bool, runtime.Object, error) {
				if !dryRunEviction(a) {
					t.Errorf("not a dry-run eviction: %v", a)
				}
				calls++
				return true, nil, tc.err
			})
			c := &Controller{kubeClient: kube}
			err := c.disruptionAllowed(context.Background(), "demo-1", tc.pod)
			var wait *disruptionWaitError
			if got := errors.As(err, &wait); got != tc.wait {
				t.Errorf("wait = %v (%v), want %v", got, err, tc.wait)
			}
			if got := err != nil && !tc.wait; got != tc.fails {
				t.Errorf("failed = %v (%v), want %v", got, err, tc.fails)
			}
			if calls != tc.calls {
				t.Errorf("%d evictions asked, want %d", calls, tc.calls)
			}
		})
	}
}
