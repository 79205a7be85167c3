package main

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// The watch's times are each first event that shows the spec, Progressing
// and done after arm; a cluster's own rollout runs from its Progressing (or
// the start, when never seen Progressing) to its done, and the change to
// the last done.
func TestWatchTimesTimeEachClusterFromItsEvents(t *testing.T) {
	cluster := func(name, spec, status string, progressing bool) *clusterv1beta1.NatsCluster {
		nc := &clusterv1beta1.NatsCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		nc.Spec.Version, nc.Status.Version = spec, status
		cond := func(typ, reason string, s metav1.ConditionStatus) metav1.Condition {
			return metav1.Condition{Type: typ, Reason: reason, Status: s}
		}
		nc.Status.Conditions = []metav1.Condition{
			cond(clusterv1beta1.ConditionReady, clusterv1beta1.ReasonAllServersReady, metav1.ConditionTrue),
			cond(clusterv1beta1.ConditionSettled, clusterv1beta1.ReasonAllGroupsCurrent, metav1.ConditionTrue),
			cond(clusterv1beta1.ConditionProgressing, clusterv1beta1.ReasonUpToDate, metav1.ConditionFalse),
		}
		if progressing {
			nc.Status.Conditions[2] = cond(clusterv1beta1.ConditionProgressing, clusterv1beta1.ReasonRollingRestart, metav1.ConditionTrue)
		}
		return nc
	}
	start := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }

	var w watchTimes
	w.recordAt(cluster("a", "2.15.1", "2.15.2", true), start) // before arm: not recorded
	w.arm("2.15.1")
	w.recordAt(cluster("a", "2.15.2", "2.15.2", false), at(100)) // at rest on the old version
	w.recordAt(cluster("a", "2.15.1", "2.15.2", false), at(300))
	w.recordAt(cluster("a", "2.15.1", "2.15.2", true), at(900))
	w.recordAt(cluster("a", "2.15.1", "2.15.2", true), at(1500))
	w.recordAt(cluster("a", "2.15.1", "2.15.1", true), at(9000)) // on the version, still Progressing: not done
	w.recordAt(cluster("a", "2.15.1", "2.15.1", false), at(9500))
	w.recordAt(cluster("a", "2.15.1", "2.15.1", true), at(9700)) // after done: neither Progressing nor done again
	w.recordAt(cluster("a", "2.15.1", "2.15.1", false), at(9900))
	w.recordAt(cluster("b", "2.15.1", "2.15.2", false), at(200))
	w.recordAt(cluster("b", "2.15.1", "2.15.2", true), at(2000))
	w.recordAt(cluster("b", "2.15.1", "2.15.1", false), at(10000))
	w.recordAt(cluster("c", "2.15.1", "2.15.1", false), at(400)) // never seen Progressing

	sts := func(cluster, image string) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: cluster + "-0", Labels: map[string]string{clusterv1beta1.LabelCluster: cluster}}}
		s.Spec.Template.Spec.Containers = []corev1.Container{{Name: "nats", Image: image}}
		return s
	}
	w.recordStatefulSetAt(sts("a", "nats:2.15.2"), at(350)) // the old template
	w.recordStatefulSetAt(sts("a", "nats:2.15.1"), at(600)) // a's first step
	w.recordStatefulSetAt(sts("a", "nats:2.15.1"), at(700))
	w.recordStatefulSetAt(sts("b", "nats:2.15.1@sha256:0123"), at(2500)) // after b's Progressing
	unlabelled := sts("d", "nats:2.15.1")
	unlabelled.Labels = nil
	w.recordStatefulSetAt(unlabelled, at(300)) // not a server's

	if got := w.doneCount(); got != 3 {
		t.Fatalf("doneCount = %d, want 3", got)
	}
	got := w.times()
	spec, step, progressing, done := got.spec, got.step, got.progressing, got.done
	for _, c := range []struct {
		what string
		m    map[string]time.Time
		key  string
		want time.Time
	}{
		{"spec", spec, "ns/a", at(300)}, {"progressing", progressing, "ns/a", at(900)}, {"done", done, "ns/a", at(9500)},
		{"spec", spec, "ns/b", at(200)}, {"progressing", progressing, "ns/b", at(2000)}, {"done", done, "ns/b", at(10000)},
		{"done", done, "ns/c", at(400)}, {"step", step, "ns/a", at(600)}, {"step", step, "ns/b", at(2500)},
	} {
		if got := c.m[c.key]; !got.Equal(c.want) {
			t.Errorf("%s of %s at %s, want %s", c.what, c.key, got.Sub(start), c.want.Sub(start))
		}
	}
	if _, ok := progressing["ns/c"]; ok {
		t.Errorf("ns/c was never Progressing, yet has a time: %s", progressing["ns/c"].Sub(start))
	}
	if len(step) != 2 {
		t.Errorf("steps of %d clusters, want 2 (a and b): %v", len(step), step)
	}

	res := timesOf(start, got)
	if res.all != 10*time.Second || res.lastKey != "ns/b" {
		t.Errorf("all %s (last %s), want 10s (ns/b)", res.all, res.lastKey)
	}
	if res.first != 400*time.Millisecond {
		t.Errorf("first %s, want 400ms", res.first)
	}
	// a: from its first step (0.6 s) to done (9.5 s); b: from its
	// Progressing (2 s, before its step) to done (10 s).
	if res.slowest != 8900*time.Millisecond || res.slowestKey != "ns/a" {
		t.Errorf("slowest %s (%s), want 8.9s (ns/a: first step at 0.6 s, done at 9.5 s)", res.slowest, res.slowestKey)
	}
	if res.fromProgressing != 8600*time.Millisecond || res.fromProgressingKey != "ns/a" {
		t.Errorf("slowest from Progressing %s (%s), want 8.6s (ns/a: Progressing at 0.9 s, done at 9.5 s)", res.fromProgressing, res.fromProgressingKey)
	}
	if res.maxStart != 2*time.Second || res.maxStep != 2*time.Second {
		t.Errorf("maxStart %s, maxStep %s, want 2s each (b)", res.maxStart, res.maxStep)
	}
}
