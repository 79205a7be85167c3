package controller

// The last check before a server restarts: the PodDisruptionBudget. The
// observation the planner decided on is a few seconds old; a node drain (or
// any eviction) the budget allowed meanwhile may have taken another server
// down. The check reads, as the step is about to be written, the cluster's
// budget and pods as the informers hold them now: the budget's status (the
// disruption controller's count, which the eviction API itself lowers at each
// eviction it allows) and each other server's pod (being deleted or not
// Ready is a server down, seen before the budget's status says so). Refused,
// the step waits with the budget's words, and nothing is written.
//
// It was asked of the eviction API in dry run until issue 37: that was the
// most expensive request of a step (1.44 s of the API server's time under a
// 100-cluster change, which also makes the API server list the namespace's
// budgets) and one of the five every step queued behind the client's rate
// limit. The dry run was no more atomic than this read: an eviction after it
// and before the pod's deletion took a second server down just the same.
// What the cache may miss is an eviction in the few milliseconds its watch
// is behind. An eviction the budget granted is named in its status
// (DisruptedPods) before the pod is deleted: the step waits for it. A status
// behind a pod that became Ready is not waited for (healthy, below).

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
)

// disruptionWaitError is a restart the PodDisruptionBudget does not allow
// now: a wait, reported in Progressing, not an error.
type disruptionWaitError struct {
	server, words string
}

func (e *disruptionWaitError) Error() string {
	return fmt.Sprintf("before restarting %s: waiting, the PodDisruptionBudget allows no disruption now (another server is down or being evicted): %s", e.server, e.words)
}

// budgetView is what the budget check reads: the cluster's
// PodDisruptionBudget (nil when there is none) and the pod of each server
// that runs (name -> pod, nil when its pod is missing), from the informers'
// caches as the step is taken (gatherBudget).
type budgetView struct {
	pdb  *policyv1.PodDisruptionBudget
	pods map[string]*corev1.Pod
}

// disruptionAllowed says whether server's pod (view's) may go now, by the
// budget as view has it: a pod already gone, being deleted or not Ready is not the
// budget's to guard (the eviction API lets an unhealthy pod go too).
// Otherwise every other server's pod must be there, Ready and not being
// deleted, and the budget's status must allow a disruption (as the eviction
// API would count it: a status older than the budget's spec allows none).
func disruptionAllowed(server string, view budgetView) error {
	if pod := view.pods[server]; pod == nil || pod.DeletionTimestamp != nil || !kubeutil.PodReady(pod) {
		return nil
	}
	var down []string
	for name, p := range view.pods {
		switch {
		case name == server:
		case p == nil:
			down = append(down, name+" has no pod")
		case p.DeletionTimestamp != nil:
			down = append(down, p.Name+" is being deleted")
		case !kubeutil.PodReady(p):
			down = append(down, p.Name+" is not Ready")
		}
	}
	if len(down) > 0 {
		slices.Sort(down)
		return &disruptionWaitError{server: server, words: "the pod's disruption budget allows one server down at a time: " + strings.Join(down, ", ")}
	}
	pdb := view.pdb
	if pdb == nil {
		return nil
	}
	own := view.pods[server].Name
	var granted []string
	for pod := range pdb.Status.DisruptedPods {
		if pod != own {
			granted = append(granted, pod)
		}
	}
	n := healthy(view)
	switch st := pdb.Status; {
	case st.ObservedGeneration < pdb.Generation:
		return &disruptionWaitError{server: server, words: fmt.Sprintf(
			"the status of the pod's disruption budget %s is older than its spec (generation %d, status of %d)", pdb.Name, pdb.Generation, st.ObservedGeneration)}
	case len(granted) > 0:
		slices.Sort(granted)
		return &disruptionWaitError{server: server, words: fmt.Sprintf(
			"the pod's disruption budget %s granted the eviction of %s", pdb.Name, strings.Join(granted, ", "))}
	case st.DisruptionsAllowed < 1 && !(st.CurrentHealthy < n && n-1 >= st.DesiredHealthy):
		return &disruptionWaitError{server: server, words: fmt.Sprintf(
			"the pod's disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, st.DesiredHealthy, st.CurrentHealthy)}
	}
	return nil
}

// healthy counts the view's pods that are Ready and not being deleted.
//
// A budget whose status allows no disruption while it counts fewer healthy
// pods than these is behind a pod that became Ready (the disruption
// controller writes its count a few hundred milliseconds after the pod's
// readiness): the step goes on the pods' own count. Going on it is as safe
// as the status: while the status allows none, the eviction API grants no
// eviction, and an eviction it granted before is named in DisruptedPods,
// which makes the step wait.
func healthy(view budgetView) int32 {
	var n int32
	for _, p := range view.pods {
		if p != nil && p.DeletionTimestamp == nil && kubeutil.PodReady(p) {
			n++
		}
	}
	return n
}
