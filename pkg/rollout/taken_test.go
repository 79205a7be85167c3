package rollout

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// A restart step through an open gate says what its status is once taken
// (Decision.Taken): the wait for GateTargetRevision. The sync after the
// step plans on its server's objects at the target while its old process
// still runs (shutting down in lame duck); when that sync finds only
// TargetRevision closed, it decides exactly Taken's status.rollout and
// Progressing, so it has no status to write (the fleet of issue 37 wrote
// one more status per step: "Progressing","rollout" 0.4-0.7 s after it).
// When another check closes first, it decides that wait instead, as before.
func TestATakenStepsStatusIsWhatTheNextSyncDecides(t *testing.T) {
	afterStep := func(in Input, d Decision, also ...opt) Input {
		t.Helper()
		name := d.Step.Servers[0]
		objectsAt(server(&in, name), newRev) // its template and ConfigMap at the target; its old pod goes
		in.Previous = d.Taken.Rollout.DeepCopy()
		in.Now = metav1.NewTime(in.Now.Add(400 * time.Millisecond))
		for _, o := range also {
			o(&in)
		}
		return in
	}
	cases := []struct {
		name  string
		in    Input
		also  []opt
		equal bool
	}{
		{name: "one server, no Raft group", in: cluster(1, target(func(f *ConfigFacts) { f.JetStream = false }), running(func(f *ConfigFacts) { f.JetStream = false }), metaMembers()), equal: true},
		{name: "three servers, the second step", in: cluster(3, stepped("demo-2"), previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Updated: []string{"demo-2"}, RestartReason: "the version changes"})), equal: true},
		{name: "groups catching up after the step", in: cluster(3), also: []opt{unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "stream $G/ORDERS: demo-1 lag up to 3")}},
		{name: "its pod no longer Ready", in: cluster(3), also: []opt{func(in *Input) {
			for i := range in.Servers {
				if in.Servers[i].ConfigRevision == newRev {
					in.Servers[i].PodReady = false
				}
			}
		}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Plan(c.in)
			if d.Step == nil || d.Step.Kind != RestartOne || d.Taken == nil {
				t.Fatalf("want a RestartOne step with Taken, got %s", toJSON(d))
			}
			if g := d.Taken.Rollout.Gate; g == nil || g.WaitingFor != clusterv1beta1.GateTargetRevision || !g.Since.Equal(&c.in.Now) {
				t.Fatalf("Taken's gate: %s", toJSON(d.Taken.Rollout.Gate))
			}
			next := Plan(afterStep(c.in, d, c.also...))
			if next.Step != nil {
				t.Fatalf("the sync after the step steps again: %s", toJSON(next))
			}
			same := reflect.DeepEqual(next.Rollout, d.Taken.Rollout) && next.Progressing == d.Taken.Progressing
			if same != c.equal {
				t.Errorf("next sync's status equals Taken: %v, want %v\ntaken %s\n%s\nnext  %s\n%s", same, c.equal,
					d.Taken.Progressing.Message, toJSON(d.Taken.Rollout), next.Progressing.Message, toJSON(next.Rollout))
			}
		})
	}
}

// Steps through a closed gate or a pause (force-step, a server that is
// down) say so in their message; they have no Taken, and the sync after
// them writes the wait.
func TestAForcedStepHasNoTaken(t *testing.T) {
	d := Plan(cluster(3, annotate(clusterv1beta1.AnnotationForceStep, "demo-1"), unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "catching up")))
	if d.Step == nil || !d.Step.Forced {
		t.Fatalf("want a forced step, got %s", toJSON(d))
	}
	if d.Taken != nil {
		t.Errorf("a forced step has Taken %s", toJSON(d.Taken))
	}
}
