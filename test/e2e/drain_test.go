package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/framework"
)

// pauseBeforeStep is how long this test's controller pauses between
// deciding a step and writing it (--pause-before-step, tests only).
const pauseBeforeStep = 10 * time.Second

var (
	pausing  = regexp.MustCompile(`(?m)^I\d{4} (\d{2}:\d{2}:\d{2}\.\d{6}) .*"Pausing before the step" .*server="([^"]+)"`)
	waitLine = regexp.MustCompile(`"The step waits for the PodDisruptionBudget" .*message="((?:[^"\\]|\\.)*)"`)
)

// A drain between the observation and the step: the controller decided to
// restart a server on a settled cluster, and before it wrote anything an
// eviction the PodDisruptionBudget allowed took another server down (the
// controller is paused there by --pause-before-step). The step reads the
// budget and the other servers' pods from the controller's caches, which
// the eviction has reached by then, is refused, and waits with the
// budget's words; it is
// taken once the evicted server is back. The test's own tracker never sees
// two servers down at once, and the rollout completes.
func TestAnEvictionBetweenTheObservationAndTheStepMakesTheStepWait(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	s := framework.OwnController(ctx, t, "drain", "--pause-before-step="+pauseBeforeStep.String())
	clusterOf(ctx, t, s, 3, nil)
	tr, err := s.StartTracker(ctx, s.NS, "demo", servers, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}

	pauses := func() [][][]byte {
		b, err := os.ReadFile(s.Controller.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		return pausing.FindAllSubmatch(b, -1)
	}
	earlier := len(pauses()) // steps of the cluster's creation, if any
	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.1"}}`)
	var stepped string
	var paused time.Time
	poll.Eventually(t, 2*time.Minute, 50*time.Millisecond, "the controller to pause before the rollout's first step", func() error {
		m := pauses()
		if len(m) <= earlier {
			return fmt.Errorf("no new %q in %s", "Pausing before the step", s.Controller.LogPath)
		}
		stepped = string(m[earlier][2])
		paused = logTime(t, string(m[earlier][1]))
		return nil
	})
	victim := "demo-0"
	if stepped == victim {
		victim = "demo-1"
	}
	// Evict with the pause nearly over: the evicted server is still down
	// when the step asks the budget. The pause is timed from the log line's
	// own time, not from when this test read it (on a loaded machine that
	// was seconds later, and the eviction came after the step).
	// 0.7 s before the step: evicted 3 s before it, the local node had the
	// server back 0.4 s after its eviction and Ready soon after, and the
	// budget allowed the step again (CI); a pod is Ready a second or more
	// after its eviction at the earliest.
	if left := pauseBeforeStep - time.Since(paused); left < 1500*time.Millisecond {
		t.Fatalf("the pause before the step was noticed %s after it began: too late to evict within it", time.Since(paused).Round(time.Millisecond))
	}
	time.Sleep(pauseBeforeStep - 700*time.Millisecond - time.Since(paused))
	if err := s.Kube.PolicyV1().Evictions(s.NS).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: s.NS, Name: victim + "-0"}}); err != nil {
		t.Fatalf("evicting %s-0 (the budget should allow it: every server is up): %v", victim, err)
	}
	t.Logf("the controller paused before restarting %s; %s-0 evicted %s later", stepped, victim, time.Since(paused).Round(time.Millisecond))

	// The wait is in Progressing until the next sync (about a second)
	// finds the gate closed on the evicted server; the controller's log
	// keeps it.
	var waited string
	poll.Eventually(t, time.Minute, 100*time.Millisecond, "the step to wait for the PodDisruptionBudget", func() error {
		b, err := os.ReadFile(s.Controller.LogPath)
		if err != nil {
			return err
		}
		m := waitLine.FindSubmatch(b)
		if m == nil {
			return fmt.Errorf("no %q in %s", "The step waits for the PodDisruptionBudget", s.Controller.LogPath)
		}
		waited = string(m[1])
		return nil
	})
	t.Logf("the step waited: %s", waited)
	requireContains(t, "the wait", waited, "before restarting "+stepped, "disruption budget")

	nc := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 6*time.Minute)
	tr.Stop()
	if nc.Status.Version != "2.15.1" {
		t.Errorf("status.version %s after the rollout, want 2.15.1", nc.Status.Version)
	}
	most, at := 0, time.Time{}
	var which []string
	for _, o := range tr.Observations() {
		down := slices.Clone(o.NotReady)
		for _, srv := range o.Silent {
			if !slices.Contains(down, srv) {
				down = append(down, srv)
			}
		}
		if len(down) > most {
			most, at, which = len(down), o.At, down
		}
	}
	if most > 1 {
		t.Errorf("%d servers down at once at %s: %v", most, at.Format(time.RFC3339Nano), which)
	}
	t.Logf("%d tracker observations: at most %d server down at once (%v); restart order %v", len(tr.Observations()), most, which, tr.RestartOrder())
}

// logTime is the time of a klog line's clock ("19:34:48.583353", the
// machine's local time) on today's date.
func logTime(t *testing.T, clock string) time.Time {
	t.Helper()
	c, err := time.ParseInLocation("15:04:05.000000", clock, time.Local)
	if err != nil {
		t.Fatalf("the log line's time %q: %v", clock, err)
	}
	now := time.Now()
	at := time.Date(now.Year(), now.Month(), now.Day(), c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), time.Local)
	if at.After(now.Add(time.Hour)) {
		at = at.AddDate(0, 0, -1) // logged before midnight
	}
	return at
}
