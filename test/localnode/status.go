package localnode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// statusLoop writes the pod status when it changes, and every 10 s to catch
// up after a failed write.
func (w *podWorker) statusLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.dirty:
		case <-time.After(10 * time.Second):
		}
		w.syncStatus(ctx)
	}
}

// syncStatus patches the pod status if it differs from the last write.
func (w *podWorker) syncStatus(ctx context.Context) {
	w.statusMu.Lock()
	defer w.statusMu.Unlock()
	pod, gone := w.current()
	if gone {
		return
	}
	st := w.status(pod)
	if w.lastSent != nil && apiequality.Semantic.DeepEqual(&st, w.lastSent) {
		return
	}
	patch, err := statusPatch(w.uid, &st)
	if err != nil {
		w.log.Error(err, "Encoding pod status failed")
		return
	}
	_, err = w.n.client.CoreV1().Pods(w.ns).Patch(ctx, w.name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		if ctx.Err() == nil && !apierrors.IsNotFound(err) {
			w.log.Error(err, "Updating pod status failed")
			go func() {
				time.Sleep(time.Second)
				w.markDirty()
			}()
		}
		return
	}
	w.lastSent = &st
}

// status computes the pod status from the worker's state. Transition times
// are kept while a condition's status holds.
func (w *podWorker) status(pod *corev1.Pod) corev1.PodStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := corev1.PodStatus{
		HostIP:    "127.0.0.1",
		HostIPs:   []corev1.HostIP{{IP: "127.0.0.1"}},
		PodIP:     w.ip,
		PodIPs:    []corev1.PodIP{{IP: w.ip}},
		StartTime: &w.startTime,
		QOSClass:  pod.Status.QOSClass,
		// Dropped by the API server unless PodObservedGenerationTracking
		// is on.
		ObservedGeneration: pod.Generation,
	}
	var allStarted, allReady, allDone, anyFailed = w.initDone, true, true, false
	var notReady []string
	for _, c := range w.containers {
		if !c.everStarted {
			allStarted = false
		}
		if !c.ready {
			allReady = false
			notReady = append(notReady, c.spec.Name)
		}
		if !c.done {
			allDone = false
		} else if t := c.state.Terminated; t != nil && t.ExitCode != 0 {
			anyFailed = true
		}
	}
	initFailed := false
	for _, c := range w.inits {
		if c.done && c.state.Terminated != nil && c.state.Terminated.ExitCode != 0 {
			initFailed = true
		}
	}
	switch {
	case initFailed:
		st.Phase = corev1.PodFailed
	case w.initDone && allDone && len(w.containers) > 0:
		st.Phase = corev1.PodSucceeded
		if anyFailed {
			st.Phase = corev1.PodFailed
		}
	case allStarted:
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	if !w.initDone {
		allReady = false
	}
	gatesOK := true
	for _, g := range pod.Spec.ReadinessGates {
		found := false
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				found = true
			}
		}
		if !found {
			gatesOK = false
		}
	}
	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
		if ok {
			c = corev1.PodCondition{Type: t, Status: corev1.ConditionTrue}
		}
		c.LastTransitionTime = w.transitionTime(pod, t, c.Status)
		c.ObservedGeneration = pod.Generation
		return c
	}
	notReadyMsg := fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	readyReason, readyMsg := "ContainersNotReady", notReadyMsg
	if allReady && !gatesOK {
		readyReason, readyMsg = "ReadinessGatesNotReady", "the status of pod readiness gate is not \"True\""
	}
	if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
		readyReason = "PodCompleted"
		allReady = false
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, true, "", ""),
		cond(corev1.PodInitialized, w.initDone, "ContainersNotInitialized", "containers with incomplete status: init containers"),
		cond(corev1.PodReady, allReady && gatesOK, readyReason, readyMsg),
		cond(corev1.ContainersReady, allReady, readyReason, notReadyMsg),
		cond(corev1.PodScheduled, true, "", ""),
	}
	for _, c := range w.inits {
		st.InitContainerStatuses = append(st.InitContainerStatuses, c.statusLocked(w))
	}
	for _, c := range w.containers {
		st.ContainerStatuses = append(st.ContainerStatuses, c.statusLocked(w))
	}
	return st
}

// transitionTime returns when a condition took status s: kept from the last
// write or the object while unchanged, now otherwise.
func (w *podWorker) transitionTime(pod *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus) metav1.Time {
	if w.lastSent != nil {
		for _, c := range w.lastSent.Conditions {
			if c.Type == t && c.Status == s {
				return c.LastTransitionTime
			}
		}
		return metav1.NewTime(time.Now().Truncate(time.Second))
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == t && c.Status == s && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime
		}
	}
	return metav1.NewTime(time.Now().Truncate(time.Second))
}

// statusLocked returns the container status; w.mu is held.
func (c *container) statusLocked(w *podWorker) corev1.ContainerStatus {
	st := corev1.ContainerStatus{
		Name:                 c.spec.Name,
		Image:                c.spec.Image,
		ImageID:              c.imageID,
		RestartCount:         c.restartCount,
		Ready:                c.ready,
		Started:              &c.started,
		State:                c.state,
		LastTerminationState: c.lastState,
	}
	if c.everStarted {
		st.ContainerID = c.containerID
	}
	if st.State.Waiting == nil && st.State.Running == nil && st.State.Terminated == nil {
		reason := w.waitReason
		if reason == "" {
			reason = "ContainerCreating"
		}
		if c.init || !w.initDone && len(w.inits) > 0 {
			reason = "PodInitializing"
			if c.init {
				reason = "ContainerCreating"
			}
		}
		st.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: w.waitMsg}
	}
	started := c.started
	st.Started = &started
	return st
}

// statusPatch returns a strategic merge patch that sets the whole status:
// conditions merge by type (others' conditions stay), podIPs and hostIPs are
// replaced rather than merged by ip, and the UID guards against a new pod of
// the same name, as the kubelet does.
func statusPatch(uid types.UID, st *corev1.PodStatus) ([]byte, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for _, k := range []string{"podIPs", "hostIPs"} {
		if l, ok := m[k].([]any); ok {
			m[k] = append([]any{map[string]any{"$patch": "replace"}}, l...)
		}
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"status":   m,
	})
}
