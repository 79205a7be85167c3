package controller

import (
	"context"
	"testing"
	"time"
)

// A sync in flight when the controller is told to stop goes on: its
// context is not cancelled with the signal's, only DrainTimeout later, so
// the step it takes is finished rather than cut between its writes.
func TestASyncInFlightOutlivesTheStopForItsDrainTimeout(t *testing.T) {
	parent, stop := context.WithCancel(context.Background())
	ctx, cancel := drainContext(parent, time.Hour)
	stop() // SIGTERM
	<-parent.Done()
	time.Sleep(10 * time.Millisecond) // the stop's AfterFunc has run
	if ctx.Err() != nil {
		t.Fatal("the sync's context was cancelled with the signal's")
	}
	cancel()

	parent, stop = context.WithCancel(context.Background())
	ctx, cancel = drainContext(parent, 10*time.Millisecond)
	defer cancel()
	stop()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the sync's context outlived its drain timeout")
	}

	// A sync that ends before any stop releases its context, and a stop
	// after that cancels nothing more.
	parent, stop = context.WithCancel(context.Background())
	ctx, cancel = drainContext(parent, time.Hour)
	if ctx.Err() != nil {
		t.Fatal("a fresh sync context is done")
	}
	cancel()
	if ctx.Err() == nil {
		t.Fatal("cancel did not end the sync's context")
	}
	stop()
}
