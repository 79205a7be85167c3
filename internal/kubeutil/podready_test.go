package kubeutil

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodReady(t *testing.T) {
	now := metav1.Now()
	withConditions := func(cs ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: cs}}
	}
	ready := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue}
	deleting := withConditions(ready)
	deleting.DeletionTimestamp = &now

	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"a pod that does not exist is not ready", nil, false},
		{"a pod without conditions is not ready", withConditions(), false},
		{"a pod whose Ready condition is True is ready", withConditions(ready), true},
		{"a pod whose Ready condition is False is not ready", withConditions(corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse}), false},
		{"a pod whose Ready condition is Unknown is not ready", withConditions(corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionUnknown}), false},
		{"a pod with only other conditions True is not ready", withConditions(
			corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		), false},
		{"the Ready condition decides whatever its position", withConditions(
			corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			ready,
		), true},
		{"a Ready pod that is being deleted is not ready", deleting, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodReady(tc.pod); got != tc.want {
				t.Errorf("PodReady() = %v, want %v", got, tc.want)
			}
		})
	}
}
