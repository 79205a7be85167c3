package kubeutil

import corev1 "k8s.io/api/core/v1"

// PodReady reports whether a pod is Ready and not being deleted: its Ready
// condition is True and it has no deletionTimestamp. A nil pod (one that
// does not exist) is not Ready, nor is a pod without a Ready condition.
func PodReady(pod *corev1.Pod) bool {
	if pod == nil || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
