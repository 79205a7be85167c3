package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// A restart step's status is written as it is once the step is taken
// (rollout.Decision.Taken): waiting for demo-2 to run the target. The sync
// that write brings finds demo-2's old pod going, still answering with the
// old revision, the cluster settled: the same wait, so it writes nothing
// (issue 37's fleet wrote a status after each step for it: 51 of the 485
// writes before its last cluster's first step). When that sync finds the
// cluster not settled, it writes that wait, as before.
func TestTheSyncAfterAStepFindsItsStatusWritten(t *testing.T) {
	for _, tc := range []struct {
		name    string
		settled bool
		want    []string
	}{
		{name: "settled while the server shuts down", settled: true},
		{name: "not settled", settled: false, want: []string{"update natsclusters/status demo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, snap := versionChange(t)
			var oldPod *corev1.Pod
			for _, o := range f.kubeObjects {
				if p, ok := o.(*corev1.Pod); ok && p.Name == "demo-2-0" {
					oldPod = p.DeepCopy()
				}
			}
			f.snap = snap(true)
			acts := f.sync()
			assertActions(t, acts, "update statefulsets demo-2", "update configmaps demo-2-config", "delete pods demo-2-0",
				"update natsclusters/status demo")
			f.nc = writtenStatus(acts)
			p := meta.FindStatusCondition(f.nc.Status.Conditions, clusterv1beta1.ConditionProgressing)
			if p == nil || p.Message != "restarting demo-2 (1 of 3); waiting for TargetRevision" {
				t.Fatalf("Progressing after the step: %+v", p)
			}
			if r := f.nc.Status.Rollout; r == nil || r.Current != "demo-2" || r.Gate == nil || r.Gate.WaitingFor != clusterv1beta1.GateTargetRevision {
				t.Fatalf("status.rollout after the step: %+v", r)
			}

			// The next sync, which the status write brings: the caches
			// have the step's template and ConfigMap but not yet the pod's
			// deletion (the pod, shutting down, still answers with the old
			// revision), as in the fleet's syncs after a step.
			f.keepObjects()
			f.kubeObjects = append(f.kubeObjects, oldPod)
			f.snap = snap(tc.settled)
			acts = f.sync()
			assertActions(t, acts, tc.want...)
			if !tc.settled {
				r := writtenStatus(acts).Status.Rollout
				if r.Gate == nil || r.Gate.WaitingFor != clusterv1beta1.GateSettled || !strings.HasPrefix(meta.FindStatusCondition(writtenStatus(acts).Status.Conditions, clusterv1beta1.ConditionProgressing).Message, "restarting demo-2 (1 of 3); waiting for Settled") {
					t.Errorf("status.rollout after the step, not settled: %+v", r)
				}
			}
		})
	}
}
