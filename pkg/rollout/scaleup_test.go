package rollout

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// scaledUp is cluster(from) scaled to `to` servers with per-server
// revisions: the running servers' own revisions ("rev-0", ...) are their
// targets, so none needs a step, and the added servers are not created yet.
// The cluster's revision moves from oldRev to newRev.
func scaledUp(from, to int, opts ...opt) Input {
	in := cluster(from)
	for i := range in.Servers {
		s := &in.Servers[i]
		rev := fmt.Sprintf("rev-%d", i)
		s.TargetConfigRevision, s.ConfigRevision, s.RestartRevision, s.ReportedRevision = rev, rev, rev, rev
		s.Running = in.Target
	}
	for i := from; i < to; i++ {
		in.Servers = append(in.Servers, ServerState{Name: fmt.Sprintf("demo-%d", i), Ordinal: i, TargetConfigRevision: fmt.Sprintf("rev-%d", i)})
	}
	for _, o := range opts {
		o(&in)
	}
	return in
}

// joined: an added server exists, created for the target, Ready and
// reporting its revision, and is in the meta group.
func joined(names ...string) opt { return added(true, names) }

// starting: an added server exists, created for the target, its pod not
// Ready yet.
func starting(names ...string) opt { return added(false, names) }

func added(ready bool, names []string) opt {
	return func(in *Input) {
		for _, n := range names {
			s := server(in, n)
			s.Created, s.CreatedFor, s.ConfigRevision, s.RestartRevision = true, in.TargetRevision, s.TargetConfigRevision, s.TargetConfigRevision
			s.PodExists, s.Running = true, in.Target
			if ready {
				s.PodReady, s.Answered, s.ReportedRevision = true, true, s.TargetConfigRevision
				in.Observation.MetaMembers = append(in.Observation.MetaMembers, n)
			}
		}
	}
}

// retarget gives running servers another target revision: they need a step.
func retarget(ordinals ...int) opt {
	return func(in *Input) {
		for _, i := range ordinals {
			in.Servers[i].TargetConfigRevision = fmt.Sprintf("tagged-%d", i)
		}
	}
}

func TestScaleUp(t *testing.T) {
	tests := []struct {
		name     string
		in       Input
		create   []string
		step     bool
		reason   string
		status   metav1.ConditionStatus
		message  string
		rollout  *clusterv1beta1.RolloutStatus
		waitsFor string
	}{
		{
			name:    "3 to 5 servers creates demo-3 and demo-4 and steps no running server",
			in:      scaledUp(3, 5),
			create:  []string{"demo-3", "demo-4"},
			reason:  clusterv1beta1.ReasonScalingUp,
			status:  metav1.ConditionTrue,
			message: "adding demo-3, demo-4 (5 servers), no running server restarts; waiting for MetaMembership",
			rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev,
				Gate: gate(clusterv1beta1.GateMetaMembership, t0)},
			waitsFor: clusterv1beta1.GateMetaMembership,
		},
		{
			name:    "added servers whose pods are starting are waited for, still no step",
			in:      scaledUp(3, 5, starting("demo-3", "demo-4"), metaMembers("demo-0", "demo-1", "demo-2", "demo-3", "demo-4")),
			reason:  clusterv1beta1.ReasonScalingUp,
			status:  metav1.ConditionTrue,
			message: "adding demo-3, demo-4 (5 servers), no running server restarts; waiting for PodsReady",
			rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev,
				Gate: gate(clusterv1beta1.GatePodsReady, t0)},
			waitsFor: clusterv1beta1.GatePodsReady,
		},
		{
			name:    "once the added servers are Ready, in the meta group and report their revision, the cluster is up to date",
			in:      scaledUp(3, 5, joined("demo-3", "demo-4")),
			reason:  clusterv1beta1.ReasonUpToDate,
			status:  metav1.ConditionFalse,
			message: "5 servers run at revision new",
		},
		{
			name: "an added server that cannot join for GateBlockedAfter turns the reason to GateBlocked with the detail",
			in: scaledUp(3, 4, starting("demo-3"), at(GateBlockedAfter+time.Minute),
				previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Gate: gate(clusterv1beta1.GateMetaMembership, t0)})),
			reason:  clusterv1beta1.ReasonGateBlocked,
			status:  metav1.ConditionTrue,
			message: "adding demo-3 (4 servers), no running server restarts; waiting for MetaMembership for 11m: demo-3 is not in the JetStream meta group",
			rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev,
				Gate: gate(clusterv1beta1.GateMetaMembership, t0)},
			waitsFor: clusterv1beta1.GateMetaMembership,
		},
		{
			name:     "a scale-up together with a change the running servers need creates the added servers at once and restarts no one before they joined",
			in:       scaledUp(3, 5, retarget(0, 1, 2)),
			create:   []string{"demo-3", "demo-4"},
			reason:   clusterv1beta1.ReasonRollingRestart,
			status:   metav1.ConditionTrue,
			message:  "before restarting demo-2 (1 of 5); waiting for MetaMembership",
			rollout:  &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}, Gate: gate(clusterv1beta1.GateMetaMembership, t0)},
			waitsFor: clusterv1beta1.GateMetaMembership,
		},
		{
			name:    "then, once they joined, the running servers restart one at a time; the added servers count as done",
			in:      scaledUp(3, 5, retarget(0, 1, 2), joined("demo-3", "demo-4")),
			step:    true,
			reason:  clusterv1beta1.ReasonRollingRestart,
			status:  metav1.ConditionTrue,
			message: "restarting demo-2 (3 of 5)",
			rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Updated: []string{"demo-4", "demo-3"}, Current: "demo-2", Pending: []string{"demo-1", "demo-0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tableCase(t, tt.in)
			if !slices.Equal(d.Create, tt.create) {
				t.Errorf("Create = %v, want %v", d.Create, tt.create)
			}
			if (d.Step != nil) != tt.step {
				t.Errorf("Step = %+v, want a step: %t", d.Step, tt.step)
			}
			if d.Progressing.Reason != tt.reason || d.Progressing.Status != tt.status || d.Progressing.Message != tt.message {
				t.Errorf("Progressing = %s %s %q, want %s %s %q", d.Progressing.Status, d.Progressing.Reason, d.Progressing.Message, tt.status, tt.reason, tt.message)
			}
			if toJSON(withoutRestartReason(d.Rollout)) != toJSON(tt.rollout) {
				t.Errorf("Rollout = %s, want %s", toJSON(d.Rollout), toJSON(tt.rollout))
			}
			if tt.waitsFor != "" && (d.Hold == nil || d.Hold.WaitingFor != tt.waitsFor) {
				t.Errorf("Hold = %+v, want waiting for %s", d.Hold, tt.waitsFor)
			}
			if d.Hold != nil && d.Hold.Notify != (tt.reason == clusterv1beta1.ReasonGateBlocked) {
				t.Errorf("Hold.Notify = %t for %s", d.Hold.Notify, tt.reason)
			}
		})
	}
}
