package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// waitDeletions waits until the tracker has seen n pod deletions start.
func waitDeletions(t *testing.T, tr *framework.Tracker, n int, timeout time.Duration) []framework.PodEvent {
	t.Helper()
	var d []framework.PodEvent
	poll.Eventually(t, timeout, 50*time.Millisecond, fmt.Sprintf("%d restarts", n), func() error {
		if d = tr.Deletions(); len(d) < n {
			return fmt.Errorf("%d so far", len(d))
		}
		return nil
	})
	return d
}

func checkRestartedOnce(t *testing.T, tr *framework.Tracker) {
	t.Helper()
	uids := tr.UIDs()
	for _, srv := range servers {
		if got := uids[srv+"-0"]; len(got) != 2 {
			t.Errorf("pod %s-0 had UIDs %v, want exactly 2 (restarted exactly once)", srv, got)
		}
	}
}

// With rollout.paused set mid-rollout no further step starts for 60 s and
// Progressing reads RolloutPaused; force-step pushes the next server through
// and the annotation is removed.
func TestPauseAndForceStep(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsPause)
	settledCluster(ctx, t, s, "2.15.1")
	tr, err := s.StartTracker(ctx, s.NS, "demo", servers, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Stop()

	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.2"}}`)
	first := waitDeletions(t, tr, 1, 2*time.Minute)[0]
	patchCluster(ctx, t, s, `{"spec":{"rollout":{"paused":true}}}`)
	t.Logf("paused right after the first step (%s)", first.Pod)

	poll.Eventually(t, time.Minute, 250*time.Millisecond, "Progressing RolloutPaused", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		return framework.CheckCondition(nc, clusterv1beta1.ConditionProgressing, metav1.ConditionTrue, clusterv1beta1.ReasonRolloutPaused)
	})
	pausedAt := time.Now()
	for time.Since(pausedAt) < 60*time.Second {
		if d := tr.Deletions(); len(d) > 1 {
			t.Fatalf("a step was taken while paused: %+v", d[1])
		}
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err == nil {
			if err := framework.CheckCondition(nc, clusterv1beta1.ConditionProgressing, metav1.ConditionTrue, clusterv1beta1.ReasonRolloutPaused); err != nil {
				t.Fatalf("while paused: %v", err)
			}
		}
		time.Sleep(time.Second)
	}
	nc, _ := s.Cluster(ctx, s.NS, "demo")
	t.Logf("60 s paused, no step; Progressing: %s", framework.Conditions(nc))
	if nc.Status.Rollout == nil || len(nc.Status.Rollout.Pending) == 0 {
		t.Fatalf("status.rollout while paused: %+v", nc.Status.Rollout)
	}
	next := nc.Status.Rollout.Pending[0]
	if nc.Status.Rollout.Current != "" {
		next = nc.Status.Rollout.Current
		if nc.Status.Rollout.Current == first.Pod[:len(first.Pod)-2] {
			next = nc.Status.Rollout.Pending[0]
		}
	}

	patchCluster(ctx, t, s, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, clusterv1beta1.AnnotationForceStep, next))
	d := waitDeletions(t, tr, 2, time.Minute)
	if got := d[1].Pod; got != next+"-0" {
		t.Errorf("force-step %s restarted %s", next, got)
	}
	poll.Eventually(t, 30*time.Second, 250*time.Millisecond, "the force-step annotation to be removed", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if v, ok := nc.Annotations[clusterv1beta1.AnnotationForceStep]; ok {
			return fmt.Errorf("still %q", v)
		}
		return nil
	})
	time.Sleep(5 * time.Second)
	if d := tr.Deletions(); len(d) != 2 {
		t.Errorf("after one force-step %d restarts, want 2: %+v", len(d), d)
	}

	patchCluster(ctx, t, s, `{"spec":{"rollout":{"paused":false}}}`)
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 5*time.Minute)
	tr.Stop()
	checkRestartedOnce(t, tr)
}

// The controller killed with SIGKILL between two steps, and again right
// after a step's write, completes the rollout when restarted, and every
// server is restarted exactly once.
func TestControllerCrashMidRollout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.OwnController(ctx, t, "crash")
	nc := settledCluster(ctx, t, s, "2.15.1")
	order := expectedOrder(nc.Status.JetStream.MetaLeader)
	tr, err := s.StartTracker(ctx, s.NS, "demo", servers, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Stop()

	// Kill the controller the moment the second server's StatefulSet
	// template is written: right after a step's write, before anything else.
	// The watch starts at the resourceVersion of a list made now, so it sees
	// every later write however long it takes to open (and reopens after an
	// expiry).
	sets := s.Kube.AppsV1().StatefulSets(s.NS)
	byName := "metadata.name=" + order[1]
	list, err := sets.List(ctx, metav1.ListOptions{FieldSelector: byName})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return sets.Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.2"}}`)
	waitDeletions(t, tr, 1, 2*time.Minute)
	s.Controller.Kill()
	t.Logf("killed the controller between steps (after %s)", order[0])
	time.Sleep(3 * time.Second)
	s.Controller.Start()

	oldRev := nc.Status.Config.Revision
	killed := false
	for ev := range w.ResultChan() {
		if ev.Type != watch.Modified {
			continue
		}
		sts, ok := ev.Object.(*appsv1.StatefulSet)
		if !ok {
			continue
		}
		if rev := sts.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision]; rev != "" && rev != oldRev {
			s.Controller.Kill()
			killed = true
			t.Logf("killed the controller right after it wrote %s's template (revision %s)", order[1], rev)
			break
		}
	}
	if !killed {
		t.Fatal("did not see the second step's write")
	}
	time.Sleep(3 * time.Second)
	s.Controller.Start()

	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 5*time.Minute)
	waitVersion(ctx, t, s, "2.15.2")
	time.Sleep(3 * time.Second)
	tr.Stop()
	checkRestartedOnce(t, tr)
	got := tr.RestartOrder()
	t.Logf("restart order %v (want %v)", got, order)
	if fmt.Sprint(got) != fmt.Sprint(order) {
		t.Errorf("restart order %v, want %v", got, order)
	}
}
