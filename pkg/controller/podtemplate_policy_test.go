package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// A running cluster whose podTemplate names another ServiceAccount (made
// under --pod-template-policy=any, or by a release before the policy) is
// held InvalidSpec under restricted, naming the field and the policy, and
// the sync writes nothing but its status: its servers run on as they are.
// Under any the same cluster is up to date.
func TestAClusterThePodTemplatePolicyRefusesIsHeldAndNothingChanges(t *testing.T) {
	nc := rt.NewCluster("team-a", "demo")
	nc.Spec.PodTemplate = &clusterv1beta1.PodTemplate{Spec: clusterv1beta1.PodSpecOverride{ServiceAccountName: "builder"}}
	out := mustRender(t, nc)
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: out.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}

	for _, tc := range []struct {
		policy          render.PodTemplatePolicy
		status          metav1.ConditionStatus
		reason, message string
	}{
		{render.PodTemplatePolicy{Name: render.PodTemplatePolicyRestricted}, metav1.ConditionFalse, clusterv1beta1.ReasonInvalidSpec,
			`spec.podTemplate.spec.serviceAccountName: ServiceAccount "builder" is not allowed by the controller's pod template policy "restricted" (--pod-template-policy)`},
		{render.PodTemplatePolicy{Name: render.PodTemplatePolicyAny}, metav1.ConditionFalse, clusterv1beta1.ReasonUpToDate, ""},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			f := newFixture(t, nc, running(t, out)...)
			f.snap = settled(out, out.Revision)
			f.podTemplatePolicy = tc.policy
			acts := f.sync()
			assertActions(t, acts, "update natsclusters/status demo")
			p := meta.FindStatusCondition(writtenStatus(acts).Status.Conditions, clusterv1beta1.ConditionProgressing)
			if p == nil || p.Status != tc.status || p.Reason != tc.reason || !strings.Contains(p.Message, tc.message) {
				t.Errorf("Progressing %+v, want %s %s %q", p, tc.status, tc.reason, tc.message)
			}
		})
	}
}
