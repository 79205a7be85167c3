package observe

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestObserverLeavesNoGoroutines observes a cluster (with the $SYS client
// in use, and one server silent), closes the Observer and stops the
// servers: no goroutine may be left behind.
func TestObserverLeavesNoGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	tr := newTrust(t)
	c := startCluster(t, "leak", []string{"leak-0", "leak-1", "leak-2"}, func(int) *trust { return tr })
	o := New(Options{RequestTimeout: time.Second})
	target := c.target(tr.systemCreds)
	waitFor(t, o, target, 30*time.Second, "Settled", settled)
	sys, err := o.System(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Statsz(context.Background(), "leak-0", "leak-1", "leak-2"); err != nil {
		t.Fatal(err)
	}
	c.server("leak-2").stop()
	if snap := o.Observe(context.Background(), target); snap.Verdict.Settled() {
		t.Fatalf("settled with leak-2 stopped: %s", snap.Verdict.Message)
	}
	// An Observe cancelled from outside returns with every request ended.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o.Observe(ctx, target)

	o.Close()
	if snap := o.Observe(context.Background(), target); snap.Verdict.Reason != "ObservationFailed" {
		t.Errorf("Observe after Close: %s", snap.Verdict.Reason)
	}
	c.shutdown()
	goleak.VerifyNone(t, before)
}
