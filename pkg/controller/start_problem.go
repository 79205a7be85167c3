package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nats-operator/nats-operator/pkg/render"
)

// waitingReasons are the container waiting reasons that mean the server
// cannot start as it is (as opposed to ContainerCreating or PodInitializing,
// which pass by themselves).
var waitingReasons = map[string]bool{
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CrashLoopBackOff":           true,
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
}

// maxProblemLength bounds the message kept of a start problem, so a long
// termination message cannot bloat the status.
const maxProblemLength = 300

// startProblem says why the pod's nats container cannot start or keeps
// crashing, from its status as the kubelet reports it: "ErrImagePull:
// <message>", "CrashLoopBackOff: exit code 1: <last line of the termination
// message>"; empty when there is none.
//
// A crash loop is reported between back-offs too: while the kubelet tries
// again, the container is running (or has just exited) and not Ready, with
// its last exit non-zero. Reporting only the back-off wait would make the
// status flicker, and emit a ServerCannotStart Event, on every attempt.
func startProblem(pod *corev1.Pod) string {
	if pod == nil || pod.DeletionTimestamp != nil {
		return ""
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != render.ContainerName {
			continue
		}
		w := cs.State.Waiting
		if last := cs.LastTerminationState.Terminated; w == nil && !cs.Ready && cs.RestartCount > 0 && last != nil && last.ExitCode != 0 {
			w = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"} // between back-offs
		}
		if w == nil || !waitingReasons[w.Reason] {
			return ""
		}
		msg := w.Reason
		if t := cs.LastTerminationState.Terminated; w.Reason == "CrashLoopBackOff" && t != nil {
			msg += fmt.Sprintf(": exit code %d", t.ExitCode)
			if last := lastLine(t.Message); last != "" {
				msg += ": " + last
			}
		} else if w.Message != "" {
			msg += ": " + strings.TrimSpace(w.Message)
		}
		if len(msg) > maxProblemLength {
			msg = msg[:maxProblemLength] + "..."
		}
		return msg
	}
	return ""
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
