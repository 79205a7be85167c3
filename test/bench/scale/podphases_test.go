package main

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// The phases of a pod's restart are taken from its events in order, only
// after arm, and split the cluster's change from start to done.
func TestPodPhasesSplitACluster(t *testing.T) {
	p := newPodPhases()
	h := p.handler()
	pod := func(deleting, ready bool) *corev1.Pod {
		pd := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-0-0", Labels: map[string]string{clusterv1beta1.LabelCluster: "c"}}}
		if deleting {
			pd.DeletionTimestamp = &metav1.Time{}
		}
		if ready {
			pd.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return pd
	}
	h.OnAdd(pod(false, true), false) // before arm: not recorded
	p.arm()
	start := time.Now()
	h.OnUpdate(pod(false, true), pod(true, true))
	h.OnDelete(pod(true, true))
	h.OnAdd(pod(false, false), false)
	h.OnUpdate(pod(false, false), pod(false, true))
	done := map[string]time.Time{"ns/c": time.Now()}
	ps := p.phases(start, done)
	var names []string
	for _, ph := range ps {
		names = append(names, ph.name)
		if len(ph.d) != 1 || ph.d[0] < 0 {
			t.Errorf("phase %s: %v, want one duration >= 0", ph.name, ph.d)
		}
	}
	if want := []string{"step", "termination", "recreate", "start", "report"}; !slices.Equal(names, want) {
		t.Fatalf("phases %v, want %v", names, want)
	}
	tm := p.at["ns/c"]
	if !(tm.deleting.Before(tm.gone) || tm.deleting.Equal(tm.gone)) || tm.created.Before(tm.gone) || tm.ready.Before(tm.created) {
		t.Fatalf("times out of order: %+v", tm)
	}
	if got := quantile([]time.Duration{1, 2, 3, 4}, 0.5); got != 2 {
		t.Fatalf("quantile 0.5 of 1..4 = %v, want 2", got)
	}
	if got := quantile([]time.Duration{1, 2, 3, 4}, 1); got != 4 {
		t.Fatalf("quantile 1 of 1..4 = %v, want 4", got)
	}
}

// describe gives each phase's time from the start, and "not seen" for a
// phase the watch never showed (a cluster nothing was recorded for).
func TestDescribeSaysWhatWasNotSeen(t *testing.T) {
	p := newPodPhases()
	p.arm()
	start := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	p.at["ns/c"] = &podTimes{deleting: start.Add(1500 * time.Millisecond), gone: start.Add(3 * time.Second)}
	if got, want := p.describe("ns/c", start, start.Add(20*time.Second)), "pod deleting 1.50 s, gone 3.00 s, created not seen, Ready not seen; up to date 20.00 s"; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
	if got, want := p.describe("ns/other", start, time.Time{}), "pod deleting not seen, gone not seen, created not seen, Ready not seen; up to date not seen"; got != want {
		t.Errorf("describe of an unknown cluster = %q, want %q", got, want)
	}
}
