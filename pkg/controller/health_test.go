package controller

import (
	"strings"
	"testing"
	"time"
)

// The wedged-worker health check (/healthz): on an injected clock, never
// sleeping, it fails once NatsClusters are queued and no worker took or
// finished an item for longer than the stall timeout, or once one sync has
// run for longer than it; it passes while work flows, while nothing waits,
// and on a replica whose workers do not run (a standby).
func TestWorkerHealthFailsWhenTheWorkersAreWedged(t *testing.T) {
	const stall = 10 * time.Minute
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	queued := 0
	h := NewWorkerHealth(stall, func() int { return queued })
	healthy := func(what string, now time.Time) {
		t.Helper()
		if err := h.Check(now); err != nil {
			t.Errorf("%s: unhealthy: %v", what, err)
		}
	}
	unhealthy := func(what string, now time.Time, want string) {
		t.Helper()
		err := h.Check(now)
		if err == nil {
			t.Errorf("%s: healthy, want wedged", what)
			return
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want it to say %q", what, err, want)
		}
	}

	// A standby: its informers fill the queue, no worker takes from it.
	queued = 5
	healthy("a standby with a full queue, an hour in", at(time.Hour))

	// Leading from t0+1h: the workers start.
	h.WorkersStarted(at(time.Hour))
	healthy("the workers just started with 5 queued", at(time.Hour+time.Minute))
	tok := h.SyncStarted(at(time.Hour + time.Minute))
	queued = 4
	h.SyncFinished(tok, at(time.Hour+time.Minute+2*time.Second))
	healthy("a sync finished", at(time.Hour+5*time.Minute))

	// Nothing queued for a long time, nothing in flight: at rest.
	queued = 0
	healthy("an empty queue, long after the last sync", at(5*time.Hour))

	// A cluster is queued after hours of rest and taken at once: the
	// worker's taking it is progress, the hours of rest before are not a stall.
	queued = 0
	tok = h.SyncStarted(at(5 * time.Hour))
	healthy("a sync started after hours of rest", at(5*time.Hour+time.Minute))
	h.SyncFinished(tok, at(5*time.Hour+3*time.Second))

	// Work queued and no worker takes it (the workers' goroutines are
	// gone, or every one is stuck): healthy up to the stall timeout,
	// wedged after.
	queued = 3
	healthy("3 queued, at the stall timeout", at(5*time.Hour+3*time.Second+stall))
	unhealthy("3 queued, past the stall timeout", at(5*time.Hour+4*time.Second+stall), "3 NatsClusters queued")

	// A worker takes one: progress again.
	tok = h.SyncStarted(at(6 * time.Hour))
	queued = 2
	healthy("a worker took an item", at(6*time.Hour+time.Minute))
	h.SyncFinished(tok, at(6*time.Hour+time.Second))

	// One sync that never returns, with nothing else queued: found by its age.
	queued = 0
	stuck := h.SyncStarted(at(7 * time.Hour))
	healthy("a sync running for 5 minutes", at(7*time.Hour+5*time.Minute))
	unhealthy("a sync running past the stall timeout", at(7*time.Hour+stall+time.Second), "a sync has been running")

	// The other worker keeps syncing: the stuck one is still found.
	other := h.SyncStarted(at(7*time.Hour + stall))
	h.SyncFinished(other, at(7*time.Hour+stall+time.Second))
	unhealthy("one worker stuck while the other syncs", at(7*time.Hour+stall+2*time.Second), "a sync has been running")
	h.SyncFinished(stuck, at(7*time.Hour+stall+3*time.Second))
	healthy("the stuck sync returned", at(7*time.Hour+stall+4*time.Second))

	// The workers stop (lost the Lease, SIGTERM): nothing is expected of
	// them, whatever is queued.
	queued = 10
	h.WorkersStopped()
	healthy("workers stopped, 10 queued, a day later", at(31*time.Hour))

	// A stall timeout of 0 or less disables the check; so does a nil one.
	off := NewWorkerHealth(0, func() int { return 1 })
	off.WorkersStarted(t0)
	if err := off.Check(at(24 * time.Hour)); err != nil {
		t.Errorf("disabled check failed: %v", err)
	}
	var none *WorkerHealth
	if err := none.Check(t0); err != nil {
		t.Errorf("nil check failed: %v", err)
	}
}
