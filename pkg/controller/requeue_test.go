package controller

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

func TestRequeueAfter(t *testing.T) {
	upToDate := metav1.Condition{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonUpToDate}
	settled := observe.Verdict{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonAllGroupsCurrent}
	silent := observe.Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonServersSilent}
	for _, tc := range []struct {
		name  string
		d     rollout.Decision
		v     observe.Verdict
		since time.Duration // since Progressing last changed
		want  time.Duration
	}{
		{"a settled, up-to-date cluster holding nothing is at rest: every 2 minutes",
			rollout.Decision{Progressing: upToDate}, settled, time.Hour, DefaultRestRequeue},
		{"an up-to-date cluster that has not settled for 10 minutes is looked at every 30 s",
			rollout.Decision{Progressing: upToDate}, silent, 10 * time.Minute, heldRequeue},
		{"an up-to-date cluster not settled 2 s after its rollout ended is looked at within a second",
			rollout.Decision{Progressing: upToDate}, silent, 2 * time.Second, inFlightRequeue},
		{"an up-to-date cluster not settled 20 s after its rollout ended is looked at in 5 s",
			rollout.Decision{Progressing: upToDate}, silent, 20 * time.Second, 5 * time.Second},
		{"an up-to-date cluster not settled 2 minutes after its rollout ended is looked at every 30 s",
			rollout.Decision{Progressing: upToDate}, silent, 2 * time.Minute, heldRequeue},
		{"a settled, up-to-date cluster just after its rollout is at rest",
			rollout.Decision{Progressing: upToDate}, settled, time.Second, DefaultRestRequeue},
		{"a held cluster is looked at every 30 s, settled or not",
			rollout.Decision{Progressing: metav1.Condition{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonRolloutPaused}, Hold: &rollout.Hold{}}, settled, time.Second, heldRequeue},
		{"an up-to-date cluster with a hold is looked at every 30 s",
			rollout.Decision{Progressing: upToDate, Hold: &rollout.Hold{}}, settled, time.Second, heldRequeue},
		{"a rollout in flight is looked at within a second",
			rollout.Decision{Progressing: metav1.Condition{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonRollingRestart}, Soon: true}, settled, time.Second, inFlightRequeue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := requeueAfter(tc.d, tc.v, DefaultRestRequeue, tc.since); got != tc.want {
				t.Errorf("requeueAfter = %s, want %s", got, tc.want)
			}
		})
	}
}

// A step waiting on Settled for members catching up looks again about when
// they will be current: every 50 ms within nearlyCurrentLag operations;
// further behind, once after catchUpFirstLook, then at half the time the
// rate between the last two looks leaves (at least 50 ms, at most a
// second; a lag not shrinking, every 50 ms for 2 s, then a second). The
// tail no lag shows (every member current, a /healthz still reporting a
// catch-up) is looked at as a stall. Anything else is not this case.
func TestACatchUpIsLookedAtWhenItShouldBeDone(t *testing.T) {
	waitingOnSettled := rollout.Decision{Soon: true, Rollout: &clusterv1beta1.RolloutStatus{Gate: &clusterv1beta1.Gate{WaitingFor: clusterv1beta1.GateSettled}}}
	catchingUpVerdict := observe.Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonGroupsCatchingUp}
	group := func(leader string, members ...observe.Member) observe.Group {
		return observe.Group{Kind: observe.GroupStream, Name: "ORDERS", Leader: leader, Members: members}
	}
	current := func(n string) observe.Member { return observe.Member{Name: n, Current: true} }
	behind := func(n string, lag uint64) observe.Member { return observe.Member{Name: n, Lag: lag} }
	snap := func(lag uint64) *observe.Snapshot {
		return &observe.Snapshot{Verdict: catchingUpVerdict, Groups: []observe.Group{group("demo-1", current("demo-0"), current("demo-1"), behind("demo-2", lag))}}
	}
	for _, tc := range []struct {
		name   string
		d      rollout.Decision
		v      observe.Verdict
		groups []observe.Group
		want   bool
	}{
		{"a member 1 operation behind while the step waits on Settled", waitingOnSettled, catchingUpVerdict,
			[]observe.Group{group("demo-1", current("demo-0"), current("demo-1"), behind("demo-2", 1))}, true},
		{"a member 5000 operations behind", waitingOnSettled, catchingUpVerdict,
			[]observe.Group{group("demo-1", current("demo-0"), current("demo-1"), behind("demo-2", 5000))}, true},
		{"an offline member is not catching up", waitingOnSettled, catchingUpVerdict,
			[]observe.Group{group("demo-1", current("demo-0"), current("demo-1"), observe.Member{Name: "demo-2", Offline: true})}, false},
		{"a group without a leader is not this case", waitingOnSettled, catchingUpVerdict,
			[]observe.Group{group("", current("demo-0"), behind("demo-2", 1))}, false},
		{"nothing behind (a server's /healthz or the meta leader unnamed closes it) is no lag to time: the tail's case (catchUps.next)", waitingOnSettled, catchingUpVerdict,
			[]observe.Group{group("demo-1", current("demo-0"), current("demo-1"))}, false},
		{"a gate waiting on PodsReady is left to the pod's event",
			rollout.Decision{Soon: true, Rollout: &clusterv1beta1.RolloutStatus{Gate: &clusterv1beta1.Gate{WaitingFor: clusterv1beta1.GatePodsReady}}}, catchingUpVerdict,
			[]observe.Group{group("demo-1", current("demo-0"), behind("demo-2", 1))}, false},
		{"no rollout waiting (up to date, settling) is not this case", rollout.Decision{}, catchingUpVerdict,
			[]observe.Group{group("demo-1", current("demo-0"), behind("demo-2", 1))}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, got := catchingUp(tc.d, &observe.Snapshot{Verdict: tc.v, Groups: tc.groups}); got != tc.want {
				t.Errorf("catchingUp = %v, want %v", got, tc.want)
			}
		})
	}

	key := cache.ObjectName{Namespace: "ns", Name: "demo"}
	t0 := time.Now()
	c := newCatchUps()
	// looks calls next at each step's time with the snapshot of its
	// value and checks when it looks again.
	type look struct {
		name  string
		after time.Duration
		value uint64
		want  time.Duration
	}
	looks := func(snapOf func(uint64) *observe.Snapshot, steps []look) {
		t.Helper()
		for _, step := range steps {
			got, ok := c.next(key, waitingOnSettled, snapOf(step.value), t0.Add(step.after))
			if !ok || (got-step.want).Abs() > time.Millisecond {
				t.Errorf("%s: look again after %s (%v), want %s", step.name, got, ok, step.want)
			}
		}
	}
	looks(snap, []look{
		{"within nearlyCurrentLag", 0, 40, catchUpRequeue},
		{"far behind, first seen", 50 * time.Millisecond, 13000, catchUpFirstLook},
		{"8,000 operations in 250 ms: 5,000 left, 156 ms at that rate", 300 * time.Millisecond, 5000, 78 * time.Millisecond},
		{"not shrinking: looked at every 50 ms", 400 * time.Millisecond, 5000, catchUpStalledLook},
		{"still not shrinking, 1.5 s since it stalled", 1800 * time.Millisecond, 5000, catchUpStalledLook},
		{"still not shrinking, 2.2 s since it stalled: once a second", 2500 * time.Millisecond, 5000, inFlightRequeue},
		{"1 operation in 500 ms: the second at most", 3 * time.Second, 4999, inFlightRequeue},
		{"4,000 in 100 ms: 999 left, 25 ms at that rate, 50 ms at least", 3100 * time.Millisecond, 999, catchUpRequeue},
		{"not shrinking again: a new stall, looked at soon", 3300 * time.Millisecond, 999, catchUpStalledLook},
	})
	// The tail: every member current, a server's /healthz still
	// reporting the stream catching up.
	tail := func(uint64) *observe.Snapshot {
		return &observe.Snapshot{Verdict: catchingUpVerdict, Groups: []observe.Group{group("demo-1", current("demo-0"), current("demo-1"), current("demo-2"))}}
	}
	looks(tail, []look{
		{"the tail, first seen: looked at as a stall", 3350 * time.Millisecond, 0, catchUpStalledLook},
		{"the tail 1.9 s on", 5250 * time.Millisecond, 0, catchUpStalledLook},
		{"the tail 2.05 s on: once a second", 3400*time.Millisecond + catchUpStalledFast, 0, inFlightRequeue},
	})
	looks(snap, []look{{"a lag again after the tail: looked at soon", 5500 * time.Millisecond, 40, catchUpRequeue}})
	if _, remembered := c.last[key]; !remembered || c.last[key].tail {
		t.Errorf("a lag after the tail is remembered as a tail: %+v", c.last[key])
	}
	looks(tail, []look{{"a new tail: its own stall", 5550 * time.Millisecond, 0, catchUpStalledLook}})
	headless := &observe.Snapshot{Verdict: catchingUpVerdict, Groups: []observe.Group{group("", current("demo-0"), current("demo-1"))}}
	if _, ok := c.next(key, waitingOnSettled, headless, t0.Add(5600*time.Millisecond)); ok {
		t.Errorf("a group without a leader is no catch-up's tail")
	}
	if _, ok := c.next(key, rollout.Decision{}, snap(10), t0.Add(4*time.Second)); ok {
		t.Errorf("a cluster no longer waiting is not looked at sooner")
	}
	if _, remembered := c.last[key]; remembered {
		t.Errorf("a cluster no longer waiting is still remembered")
	}
	if got, _ := c.next(key, waitingOnSettled, snap(9000), t0.Add(5*time.Second)); got != catchUpFirstLook {
		t.Errorf("a new catch-up: look again after %s, want %s", got, catchUpFirstLook)
	}
	c.forget(key)
	if _, remembered := c.last[key]; remembered {
		t.Errorf("a NatsCluster gone is still remembered")
	}

	// A member copying the stream: the leader reports the same lag, the
	// member's own store comes closer (pkg/observe
	// TestACatchUpShowsInTheMembersOwnStore).
	copying := func(store uint64) *observe.Snapshot {
		return &observe.Snapshot{Verdict: catchingUpVerdict, Groups: []observe.Group{group("demo-1", current("demo-0"), current("demo-1"),
			observe.Member{Name: "demo-2", Lag: 1307, StoreBehind: store, StoreReported: true})}}
	}
	looks(copying, []look{
		{"first seen", 0, 60000, catchUpFirstLook},
		{"the lag stands, the store came 15,813 closer in 250 ms: 44,187 left, 699 ms at that rate", 250 * time.Millisecond, 44187, 349280 * time.Microsecond},
		{"42,159 in 350 ms: 2,028 left, 17 ms at that rate, 50 ms at least", 600 * time.Millisecond, 2028, catchUpRequeue},
		{"the store stands too: a stall, looked at every 50 ms", 650 * time.Millisecond, 2028, catchUpStalledLook},
		{"2.05 s since it stalled: once a second", 2700 * time.Millisecond, 2028, inFlightRequeue},
		{"the store moves again: no longer a stall", 2800 * time.Millisecond, 0, catchUpRequeue},
		{"the last look of the copy, then standing: a new stall", 2850 * time.Millisecond, 0, catchUpStalledLook},
	})
}

// A step waiting at the gate while a server's pod is missing or not Ready
// polls every podWaitRequeue: the pod's events bring the next sync.
func TestWaitingForAPodPollsLess(t *testing.T) {
	waiting := func(gate string) rollout.Decision {
		return rollout.Decision{Soon: true, Progressing: metav1.Condition{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonRollingRestart},
			Rollout: &clusterv1beta1.RolloutStatus{Gate: &clusterv1beta1.Gate{WaitingFor: gate}}}
	}
	servers := func(ready ...bool) rollout.Input {
		var in rollout.Input
		for i, r := range ready {
			in.Servers = append(in.Servers, rollout.ServerState{Name: fmt.Sprintf("demo-%d", i), Created: true, PodExists: true, PodReady: r})
		}
		return in
	}
	stepped := waiting(clusterv1beta1.GateSettled)
	stepped.Step = &rollout.Step{Kind: rollout.RestartOne, Servers: []string{"demo-2"}}
	for _, tc := range []struct {
		name string
		d    rollout.Decision
		in   rollout.Input
		want bool
	}{
		{"waiting on Settled with a pod not Ready", waiting(clusterv1beta1.GateSettled), servers(true, true, false), true},
		{"waiting on PodsReady", waiting(clusterv1beta1.GatePodsReady), servers(true, false, true), true},
		{"waiting on Settled with every pod Ready: NATS, not a pod, opens the gate", waiting(clusterv1beta1.GateSettled), servers(true, true, true), false},
		{"a step taken", stepped, servers(true, true, false), false},
		{"not waiting at a gate", rollout.Decision{Soon: true}, servers(true, true, false), false},
		{"a pod missing", waiting(clusterv1beta1.GateObserved), func() rollout.Input {
			in := servers(true, true, true)
			in.Servers[2].PodExists, in.Servers[2].PodReady = false, false
			return in
		}(), true},
		{"a server scaled to 0 is not waited for", waiting(clusterv1beta1.GateSettled), func() rollout.Input {
			in := servers(true, true, false)
			in.Servers[2].Stopped = true
			return in
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := waitsForAPod(tc.d, tc.in); got != tc.want {
				t.Errorf("waitsForAPod = %t, want %t", got, tc.want)
			}
		})
	}
}
