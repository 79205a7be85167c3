package controller

// The last check before a server restarts: the PodDisruptionBudget, asked
// through the eviction API in dry run. The observation the planner decided
// on is a few seconds old; a node drain (or any eviction) the budget allowed
// meanwhile may have taken another server down. The dry run asks the API
// server, which counts the pods as they are now: refused, the step waits
// with the budget's words, and nothing is written.

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// disruptionWaitError is a restart the PodDisruptionBudget does not allow
// now: a wait, reported in Progressing, not an error.
type disruptionWaitError struct {
	server, words string
}

func (e *disruptionWaitError) Error() string {
	return fmt.Sprintf("before restarting %s: waiting, the PodDisruptionBudget allows no disruption now (another server is down or being evicted): %s", e.server, e.words)
}

// disruptionAllowed asks the eviction API, in dry run, whether pod may go
// now. A pod already gone or being deleted needs no asking.
func (c *Controller) disruptionAllowed(ctx context.Context, server string, pod *corev1.Pod) error {
	if pod == nil || pod.DeletionTimestamp != nil {
		return nil
	}
	uid := pod.UID
	err := c.kubeClient.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}, Preconditions: &metav1.Preconditions{UID: &uid}},
	})
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil // allowed, or the pod is already replaced
	case dryRunUnsupported(err):
		// An admission webhook with side effects refuses every dry run:
		// the check cannot be made, and the step goes as before it existed.
		klog.FromContext(ctx).V(2).Info("The eviction API cannot be asked in dry run; restarting without the check", "pod", klog.KObj(pod), "err", err)
		return nil
	case apierrors.IsTooManyRequests(err):
		return &disruptionWaitError{server: server, words: err.Error()}
	}
	return fmt.Errorf("asking the eviction API whether %s may restart: %w", server, err)
}

// dryRunUnsupported says whether err is the API server's refusal of a dry
// run because an admission webhook with side effects would see it
// (k8s.io/apiserver's webhook dispatcher: "admission webhook %q does not
// support dry run").
func dryRunUnsupported(err error) bool {
	return apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "does not support dry run")
}
