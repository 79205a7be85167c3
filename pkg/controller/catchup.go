package controller

import (
	"cmp"
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// catchUpFirstLook is how soon a step waiting on members further behind
// than nearlyCurrentLag looks again the first time: the second look gives
// the rate at which they catch up. A restarted server copied 12,000-13,000
// operations of a stream in under a second (hack/bench-rollout.sh), so
// its gate opened between two looks a second apart and the step followed
// it by up to a second.
const catchUpFirstLook = 250 * time.Millisecond

// catchUpStalledFast is how long a lag that does not shrink is still looked
// at every catchUpStalledLook before the looks slow to one a second. The lag
// a stream leader reports for a restarted follower can stay the same while
// the follower copies the stream and then drop to none at once
// (hack/bench-rollout.sh: "lag up to 9549" at two looks 1.3 s apart, current
// a second later, so the step followed the gate by 0.97 s).
const catchUpStalledFast = 2 * time.Second

// catchUpStalledLook is how often a lag that does not shrink is looked at
// within catchUpStalledFast: as often as one within nearlyCurrentLag, since
// it may be gone at the next look. At 250 ms (bench-rollout run 7, "lag up
// to 13848" unchanged for 1.3 s, then current) a step followed its gate by
// 0.27 s.
const catchUpStalledLook = catchUpRequeue

// catchUp reads a step that waits on Settled only for a catch-up: the
// rollout waits on GateSettled, the verdict is GroupsCatchingUp, every
// group has a leader, and every member not current is online and has
// joined its group (ok false otherwise). behind says some member is not
// current, and lag is the largest lag of those.
func catchUp(d rollout.Decision, snap *observe.Snapshot) (lag uint64, behind, ok bool) {
	if d.Rollout == nil || d.Rollout.Gate == nil || d.Rollout.Gate.WaitingFor != clusterv1beta1.GateSettled ||
		snap.Verdict.Reason != clusterv1beta1.ReasonGroupsCatchingUp {
		return 0, false, false
	}
	for _, g := range snap.Groups {
		if g.Leader == "" {
			return 0, false, false
		}
		for _, m := range g.Members {
			if m.Current {
				continue
			}
			if m.Offline || m.Pending {
				return 0, false, false
			}
			behind = true
			lag = max(lag, m.Lag)
		}
	}
	return lag, behind, true
}

// catchingUp returns the largest lag of the members not current when a
// step waits on Settled only for members catching up (catchUp, with some
// member behind); ok is false otherwise.
func catchingUp(d rollout.Decision, snap *observe.Snapshot) (lag uint64, ok bool) {
	lag, behind, ok := catchUp(d, snap)
	return lag, ok && behind
}

// storeBehind sums how many messages the stores of the stream members not
// current are behind their leaders, as each member reports its own store
// (observe.Member.StoreBehind); known is false when none reported one. A
// restarted member copies a stream without its Raft log, and the leader
// reports the same lag for it until the copy is done: this is what shrinks
// meanwhile.
func storeBehind(snap *observe.Snapshot) (behind uint64, known bool) {
	for _, g := range snap.Groups {
		for _, m := range g.Members {
			if !m.Current && m.StoreReported {
				behind += m.StoreBehind
				known = true
			}
		}
	}
	return behind, known
}

// catchUps remembers, per NatsCluster whose step waits for members
// catching up, the last lag observed and when, to look again about when
// the lag will be gone: half the time the rate between the last two looks
// gives, between catchUpRequeue and inFlightRequeue. A lag the leader
// reports unchanged while the members' own stores shrink their distance
// (storeBehind: a member copying a stream) is timed the same way on the
// stores. A lag that shrinks neither way is looked at every
// catchUpStalledLook for catchUpStalledFast, then once a second, as
// before. The tail of a catch-up that no lag shows (catchUp, every member current) is
// looked at as a stall. The budget: one look at catchUpFirstLook, then at
// most one look per halving of the time left, or 40 looks more per stall
// (2 s at 50 ms), and 40 more for the tail.
type catchUps struct {
	mu   sync.Mutex
	last map[cache.ObjectName]lagSample
}

type lagSample struct {
	at  time.Time
	lag uint64
	// store is storeBehind at that look, when storeKnown.
	store      uint64
	storeKnown bool
	// stalled is the first look since which the lag has not shrunk
	// (zero while it shrinks).
	stalled time.Time
	// tail is a look at a catch-up's tail (catchUp, every member current), timed as a
	// stall from its first look.
	tail bool
}

func newCatchUps() *catchUps {
	return &catchUps{last: map[cache.ObjectName]lagSample{}}
}

// next returns how soon to look again at key given the decision and the
// observation made at now; ok false when the step does not wait for members
// catching up (what was remembered of key is forgotten).
func (c *catchUps) next(key cache.ObjectName, d rollout.Decision, snap *observe.Snapshot, now time.Time) (time.Duration, bool) {
	lag, behind, waits := catchUp(d, snap)
	ok := waits && behind
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, had := c.last[key]
	if waits && !behind {
		// The tail of a catch-up that no member's lag shows: every member
		// current, while a server's /healthz still reports a stream or
		// consumer catching up, or a server does not name the meta leader
		// yet. It can open the gate at any look (bench-rollout run 22: the
		// step came 0.97 s after the last closed look, the next look being
		// the rollout's once-a-second one).
		// Nothing left to time: looked at as a lag that does not
		// shrink, every catchUpStalledLook for catchUpStalledFast from
		// the tail's first look, then once a second.
		since := now
		if had && prev.tail {
			since = prev.stalled
		}
		c.last[key] = lagSample{at: now, tail: true, stalled: since}
		return stalledLook(since, now), true
	}
	if !ok {
		delete(c.last, key)
		return 0, false
	}
	store, storeKnown := storeBehind(snap)
	cur := lagSample{at: now, lag: lag, store: store, storeKnown: storeKnown}
	c.last[key] = cur
	switch {
	case lag <= nearlyCurrentLag:
		return catchUpRequeue, true
	case !had || prev.lag <= nearlyCurrentLag || !now.After(prev.at):
		return catchUpFirstLook, true
	case lag < prev.lag:
		return halfTheTimeLeft(prev.lag-lag, lag, now.Sub(prev.at)), true
	case storeKnown && prev.storeKnown && store < prev.store:
		// The leader's lag stands still, the members' stores move: a
		// copy in progress, not a stall.
		return halfTheTimeLeft(prev.store-store, store, now.Sub(prev.at)), true
	}
	since := prev.stalled
	if since.IsZero() {
		since = prev.at
	}
	cur.stalled = since
	c.last[key] = cur
	return stalledLook(since, now), true
}

// stalledLook is when to look again at a catch-up stalled since since:
// every catchUpStalledLook for catchUpStalledFast, then once a second.
func stalledLook(since, now time.Time) time.Duration {
	if now.Sub(since) < catchUpStalledFast {
		return catchUpStalledLook
	}
	return inFlightRequeue
}

// halfTheTimeLeft is half the time the distance left takes at the rate
// done in elapsed, between catchUpRequeue and inFlightRequeue.
func halfTheTimeLeft(done, left uint64, elapsed time.Duration) time.Duration {
	rate := float64(done) / elapsed.Seconds() // per second
	return min(inFlightRequeue, max(catchUpRequeue, time.Duration(float64(left)/rate*float64(time.Second))/2))
}

// forget drops what is remembered of a NatsCluster that is gone.
func (c *catchUps) forget(key cache.ObjectName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, key)
}

// quickLooks and quickLooksWithin bound how often a sync whose step waits
// only for members within nearlyCurrentLag operations looks again at once,
// before it writes its status: at most quickLooks looks more, none begun
// later than quickLooksWithin after the sync's first. A status write takes
// 40-60 ms on a loaded API server (hack/bench-rollout.sh, 5 servers under
// load: syncs of 85-120 ms with a status write, 50 ms without), and the
// step followed its gate by a closed look, that write, and an open look
// (0.12-0.16 s). Looked again within the sync, the write is not between
// them. Under writes a follower flaps between current and an operation or
// two behind: with 3 looks, one step of 14 (bench-rollout run 14) found it
// behind three times in 48 ms, wrote its status, and was open at the next
// sync, 0.11 s after its last closed look. The budget: at most quickLooks
// observations more per sync, back to back for at most quickLooksWithin,
// only while members are a few operations behind.
const (
	quickLooks       = 6
	quickLooksWithin = 150 * time.Millisecond
)

// lookAgainAtOnce looks again, within the bounds of quickLooks, while the
// decision waits only for members within nearlyCurrentLag operations; it
// returns the last look, its plan and the time it planned at. Each look
// that found the gate closed is the one GateToStep counts from. The facts
// are the sync's own (the caches a few milliseconds ago); the step's last
// checks read the caches again.
func (c *Controller) lookAgainAtOnce(ctx context.Context, key cache.ObjectName, f *facts, snap *observe.Snapshot, p plan, now metav1.Time) (*observe.Snapshot, plan, metav1.Time) {
	first, within := now.Time, cmp.Or(c.quickLooksWithin, quickLooksWithin)
	for range quickLooks {
		if lag, ok := catchingUp(p.decision, snap); !ok || lag > nearlyCurrentLag || ctx.Err() != nil || time.Since(first) > within {
			break
		}
		c.metrics.gateLookedClosed(key, now.Time)
		now = metav1.Now()
		snap = c.observer.Observe(ctx, observeTarget(f))
		p = decide(f, snap, c.decideOptions(now))
	}
	return snap, p, now
}
