package controller

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

func TestStatusChangesNamesWhatAWriteChanges(t *testing.T) {
	old := &clusterv1beta1.NatsClusterStatus{
		ReadyReplicas: 3,
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AllServersReady", Message: "3 of 3"},
			{Type: "Progressing", Status: metav1.ConditionFalse, Reason: "UpToDate", Message: "m"},
			{Type: "Gone", Status: metav1.ConditionTrue, Reason: "X"},
		},
	}
	new := old.DeepCopy()
	new.ReadyReplicas = 2
	new.Rollout = &clusterv1beta1.RolloutStatus{}
	new.Conditions = []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AllServersReady", Message: "3 of 3"},
		{Type: "Progressing", Status: metav1.ConditionTrue, Reason: "RollingRestart", Message: "m"},
		{Type: "Settled", Status: metav1.ConditionFalse, Reason: "Y"},
	}
	got := statusChanges(old, new)
	want := []string{"Progressing", "Settled", "Gone", "readyReplicas", "rollout"}
	if !slices.Equal(got, want) {
		t.Fatalf("statusChanges = %v, want %v", got, want)
	}
	if got := statusChanges(old, old.DeepCopy()); len(got) != 0 {
		t.Fatalf("statusChanges of equal statuses = %v, want none", got)
	}
}
