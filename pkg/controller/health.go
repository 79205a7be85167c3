package controller

import (
	"fmt"
	"sync"
	"time"
)

// DefaultWorkerStallTimeout is how long the workers may make no progress
// while NatsClusters wait before /healthz fails (--worker-stall-timeout).
// A sync takes seconds (a step's writes and NATS requests; the drain allows
// one 30 s), so ten minutes without one is a wedged worker, not a slow one.
const DefaultWorkerStallTimeout = 10 * time.Minute

// WorkerHealth tells whether the workers still make progress, for the
// liveness probe (/healthz): a worker stuck in a sync (a request that never
// returns, a deadlock) or workers that stopped taking items are found
// even while the Lease is still renewed. It records, while the workers
// run, when a worker last took or finished an item and when each sync in
// flight started; the queue's length is asked at each Check. The clock is
// the caller's: every method takes now. A nil WorkerHealth records nothing
// and is always healthy.
//
// It is unhealthy when
//   - a sync has been in flight for longer than the stall timeout, or
//   - NatsClusters are queued (ready to be synced, not waiting for a
//     requeue's delay) and no worker took or finished an item for longer
//     than the stall timeout.
//
// A controller that does not lead (no workers running: its queue fills
// from its informers and nobody takes from it) and a queue with nothing
// in it are healthy.
type WorkerHealth struct {
	stall  time.Duration
	queued func() int

	mu       sync.Mutex
	running  bool
	progress time.Time // workers started, or a worker last took or finished an item
	next     uint64
	inFlight map[uint64]time.Time
}

// NewWorkerHealth returns a WorkerHealth for workers taking from a queue
// whose length queued says; stall <= 0 disables the check.
func NewWorkerHealth(stall time.Duration, queued func() int) *WorkerHealth {
	return &WorkerHealth{stall: stall, queued: queued, inFlight: map[uint64]time.Time{}}
}

// WorkersStarted records that the workers started taking items at now.
func (h *WorkerHealth) WorkersStarted(now time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.running, h.progress = true, now
}

// WorkersStopped records that the workers stopped (drained, or this
// replica no longer leads): nothing is expected of them any more.
func (h *WorkerHealth) WorkersStopped() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.running = false
	clear(h.inFlight)
}

// SyncStarted records that a worker took an item at now; pass the
// returned token to SyncFinished.
func (h *WorkerHealth) SyncStarted(now time.Time) uint64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.inFlight[h.next], h.progress = now, now
	return h.next
}

// SyncFinished records that the sync of token finished at now.
func (h *WorkerHealth) SyncFinished(token uint64, now time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.inFlight, token)
	if now.After(h.progress) {
		h.progress = now
	}
}

// Check returns why the workers are wedged at now, or nil.
func (h *WorkerHealth) Check(now time.Time) error {
	if h == nil || h.stall <= 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		return nil
	}
	var oldest time.Time
	for _, start := range h.inFlight {
		if oldest.IsZero() || start.Before(oldest) {
			oldest = start
		}
	}
	if !oldest.IsZero() {
		if d := now.Sub(oldest); d > h.stall {
			return fmt.Errorf("a sync has been running for %s (more than %s): a worker is wedged", d.Round(time.Second), h.stall)
		}
	}
	if n := h.queued(); n > 0 {
		if d := now.Sub(h.progress); d > h.stall {
			return fmt.Errorf("%d NatsClusters queued and no worker took or finished a sync for %s (more than %s): the workers are wedged",
				n, d.Round(time.Second), h.stall)
		}
	}
	return nil
}
