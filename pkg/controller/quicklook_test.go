package controller

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// looksObserver answers each Observe with the next of its snapshots (the
// last one again once they run out) and counts the looks.
type looksObserver struct {
	fakeObserver
	snaps []*observe.Snapshot
	looks int
	// takes is how long each look takes (at least).
	takes time.Duration
}

func (o *looksObserver) Observe(context.Context, observe.Target) *observe.Snapshot {
	time.Sleep(o.takes)
	s := o.snaps[min(o.looks, len(o.snaps)-1)]
	o.looks++
	return s
}

// catchingUpBy is snap with a member of a stream lag operations behind.
func catchingUpBy(snap *observe.Snapshot, lag uint64) *observe.Snapshot {
	s := *snap
	s.Verdict = observe.Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonGroupsCatchingUp, Message: "demo-1 catching up in 1 group"}
	s.Groups = []observe.Group{{Kind: observe.GroupStream, Name: "ORDERS", Leader: "demo-0", Members: []observe.Member{
		{Name: "demo-0", Current: true}, {Name: "demo-1", Lag: lag}, {Name: "demo-2", Current: true}}}}
	return &s
}

// A sync whose step waits only for a member a few operations behind looks
// again at once, before it writes its status, up to quickLooks times: the
// look that finds the gate open takes the step in the same sync, and
// gate_to_step counts from the look before it. A member far behind, or a
// gate that stays closed, is left to the next sync (one look, or
// 1+quickLooks).
func TestAStepWaitingForAFewOperationsLooksAgainWithinTheSync(t *testing.T) {
	f, _, snap := versionChange(t)
	l := f.live()
	obs := &looksObserver{snaps: []*observe.Snapshot{catchingUpBy(snap(true), 1), catchingUpBy(snap(true), 2), snap(true)}}
	l.c.observer = obs
	l.c.quickLooksWithin = time.Hour
	_, acts := l.syncObserved(f.nc)
	assertActions(t, acts, "update statefulsets demo-2", "update configmaps demo-2-config", "delete pods demo-2-0", "update natsclusters/status demo")
	if obs.looks != 3 {
		t.Errorf("%d looks, want 3 (two closed, the third open)", obs.looks)
	}
	if n, _, _ := histogram(t, l.reg, "nats_operator_gate_to_step_seconds", string(rollout.RestartOne)); n != 1 {
		t.Errorf("gate_to_step has %d samples, want 1 (from the last closed look)", n)
	}

	for _, tc := range []struct {
		name  string
		lag   uint64
		looks int
	}{
		{"a member far behind: one look, the next sync looks again", 5000, 1},
		{"a gate that stays closed: 1+quickLooks looks, then the status", 1, 1 + quickLooks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, snap := versionChange(t)
			l := f.live()
			obs := &looksObserver{snaps: []*observe.Snapshot{catchingUpBy(snap(true), tc.lag)}}
			l.c.observer = obs
			l.c.quickLooksWithin = time.Hour // the count alone bounds the looks here
			_, acts := l.syncObserved(f.nc)
			assertActions(t, acts, "update natsclusters/status demo")
			if obs.looks != tc.looks {
				t.Errorf("%d looks, want %d", obs.looks, tc.looks)
			}
		})
	}

	t.Run("looks of 60 ms: none begun later than quickLooksWithin after the first", func(t *testing.T) {
		f, _, snap := versionChange(t)
		l := f.live()
		obs := &looksObserver{snaps: []*observe.Snapshot{catchingUpBy(snap(true), 1)}, takes: 60 * time.Millisecond}
		l.c.observer = obs
		l.syncObserved(f.nc)
		// Looks begin at 0, 60 and 120 ms at the soonest; the fourth
		// would begin at 180 ms or later (a slow machine only makes
		// them fewer).
		if obs.looks < 1 || obs.looks > 3 {
			t.Errorf("%d looks, want at most 3", obs.looks)
		}
	})
}
