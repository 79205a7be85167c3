package rollout

import (
	"testing"
	"time"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// A supercluster member keeps its turn only while its rollout takes steps
// of its own: a restart, or the wait for the server it just restarted.
// Done, paused, held, blocked at its gate for GateBlockedAfter, or with a
// server that cannot start, it gives the turn up (Decision.KeepsTurn), so
// one stuck member never stops the others.
func TestAMemberKeepsItsTurnOnlyWhileItTakesSteps(t *testing.T) {
	versionUp := target(func(f *ConfigFacts) { f.Version = "2.15.2" })
	tests := []struct {
		name string
		in   Input
		keep bool
	}{
		{"a restart step", cluster(3, healthyGroups, versionUp), true},
		{"waiting for the server it restarted", cluster(3, healthyGroups, versionUp, restarting("demo-2"),
			previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-2", Pending: []string{"demo-1", "demo-0"}})), true},
		{"up to date", cluster(3, healthyGroups, converged(newRev), stepped("demo-0", "demo-1", "demo-2")), false},
		{"paused", cluster(3, healthyGroups, versionUp, paused()), false},
		{"held: turning route TLS on", cluster(3, healthyGroups, target(func(f *ConfigFacts) { f.RouteTLS = true })), false},
		{"blocked at its gate", cluster(3, healthyGroups, versionUp, stepped("demo-2"), reports("demo-2", newRev),
			unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "ORDERS catching up on demo-2"), at(GateBlockedAfter+time.Minute),
			previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-2", Gate: gate(clusterv1beta1.GateSettled, ts(0))})), false},
		{"a server that cannot start", cluster(3, healthyGroups, versionUp, stepped("demo-2"), stuck("demo-2"),
			previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-2", Pending: []string{"demo-1", "demo-0"}})), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.in)
			t.Logf("Progressing %s %s: %s; step %v", d.Progressing.Status, d.Progressing.Reason, d.Progressing.Message, d.Step)
			if d.KeepsTurn != tc.keep {
				t.Errorf("KeepsTurn %t, want %t", d.KeepsTurn, tc.keep)
			}
		})
	}
}
