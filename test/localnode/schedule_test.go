package localnode

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestAPodIsBoundOnlyWhereTheSchedulerWouldPutIt(t *testing.T) {
	n := &Node{opts: Options{NodeName: "localnode", Labels: map[string]string{"pool": "nats"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "nats", Effect: corev1.TaintEffectNoSchedule}, {Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}}}
	tolerates := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "nats", Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		says string
	}{
		{"selector and toleration match", corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": "localnode", "pool": "nats"}, Tolerations: tolerates}, ""},
		{"another node's hostname", corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": "other"}, Tolerations: tolerates}, "didn't match Pod's node affinity/selector (kubernetes.io/hostname=other)"},
		{"no toleration", corev1.PodSpec{}, "untolerated taint {dedicated: nats}"},
		{"a toleration of another value", corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web"}}}, "untolerated taint"},
		{"tolerating everything", corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, ""},
	} {
		got := n.unschedulable(&corev1.Pod{Spec: tc.spec})
		if (tc.says == "") != (got == "") || !strings.Contains(got, tc.says) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.says)
		}
	}
}
