package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

func TestRequeueAfter(t *testing.T) {
	upToDate := metav1.Condition{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonUpToDate}
	settled := observe.Verdict{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonAllGroupsCurrent}
	silent := observe.Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonServersSilent}
	for _, tc := range []struct {
		name string
		d    rollout.Decision
		v    observe.Verdict
		want time.Duration
	}{
		{"a settled, up-to-date cluster holding nothing is at rest: every 2 minutes",
			rollout.Decision{Progressing: upToDate}, settled, DefaultRestRequeue},
		{"an up-to-date cluster that is not settled is looked at every 30 s",
			rollout.Decision{Progressing: upToDate}, silent, heldRequeue},
		{"a held cluster is looked at every 30 s, settled or not",
			rollout.Decision{Progressing: metav1.Condition{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonRolloutPaused}, Hold: &rollout.Hold{}}, settled, heldRequeue},
		{"an up-to-date cluster with a hold is looked at every 30 s",
			rollout.Decision{Progressing: upToDate, Hold: &rollout.Hold{}}, settled, heldRequeue},
		{"a rollout in flight is looked at within a second",
			rollout.Decision{Progressing: metav1.Condition{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonRollingRestart}, Soon: true}, settled, inFlightRequeue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := requeueAfter(tc.d, tc.v, DefaultRestRequeue); got != tc.want {
				t.Errorf("requeueAfter = %s, want %s", got, tc.want)
			}
		})
	}
}
