package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestStartProblemNamesWhyTheServerCannotStart(t *testing.T) {
	pod := func(cs corev1.ContainerStatus) *corev1.Pod {
		cs.Name = "nats"
		return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}
	}
	waiting := func(reason, msg string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"an image that cannot be pulled names the reason and the kubelet's message",
			pod(corev1.ContainerStatus{State: waiting("ErrImagePull", `failed to pull image "nats:2.15.99": not found`)}),
			`ErrImagePull: failed to pull image "nats:2.15.99": not found`},
		{"a crash loop names the last exit code and the last line of the termination message",
			pod(corev1.ContainerStatus{State: waiting("CrashLoopBackOff", "back-off 10s restarting failed container"),
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "[INF] Starting\nnats-server: nats.conf:15:6: Duplicate 'store_dir' configuration\n"}}}),
			"CrashLoopBackOff: exit code 1: nats-server: nats.conf:15:6: Duplicate 'store_dir' configuration"},
		{"a crash loop between back-offs (the container tried again and is not Ready) is still a crash loop",
			pod(corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, RestartCount: 2,
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "nats-server: Duplicate 'store_dir' configuration"}}}),
			"CrashLoopBackOff: exit code 1: nats-server: Duplicate 'store_dir' configuration"},
		{"a container that restarted and is Ready again is no problem",
			pod(corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, RestartCount: 1, Ready: true,
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}}),
			""},
		{"a container that restarted after a clean exit is no problem",
			pod(corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, RestartCount: 1,
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}),
			""},
		{"a missing Secret or ConfigMap is a CreateContainerConfigError",
			pod(corev1.ContainerStatus{State: waiting("CreateContainerConfigError", `configmap "demo-0-config" not found`)}),
			`CreateContainerConfigError: configmap "demo-0-config" not found`},
		{"a container being created is no problem", pod(corev1.ContainerStatus{State: waiting("ContainerCreating", "")}), ""},
		{"a running container is no problem", pod(corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}), ""},
		{"no pod is no problem", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := startProblem(tc.pod); got != tc.want {
				t.Errorf("startProblem = %q, want %q", got, tc.want)
			}
		})
	}
	long := pod(corev1.ContainerStatus{State: waiting("ErrImagePull", strings.Repeat("x", 1000))})
	if got := startProblem(long); len(got) > maxProblemLength+3 {
		t.Errorf("a long message is kept whole (%d characters)", len(got))
	}
}
