package rollout

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// scaledDown is cluster(5) with spec.replicas 3: demo-3 and demo-4 are extra
// servers, running, Ready and in the meta group; every spec server is on
// the target (nothing else to step), the controller can reach $SYS.
func scaledDown(opts ...opt) Input {
	in := cluster(5, stepped("demo-0", "demo-1", "demo-2", "demo-3", "demo-4"), converged(newRev), canReload)
	for _, s := range in.Servers[3:] {
		in.ExtraServers = append(in.ExtraServers, s)
	}
	in.Servers = in.Servers[:3]
	for _, o := range opts {
		o(&in)
	}
	return in
}

// group adds a stream or consumer group with its members.
func group(name string, members ...string) opt {
	return func(in *Input) {
		in.Observation.Assets = append(in.Observation.Assets, Asset{Account: GlobalAccount, Name: name, Leader: members[0], Members: members, Current: members})
	}
}

// extra changes an extra server.
func extra(name string, f func(*ServerState)) opt {
	return func(in *Input) {
		for i := range in.ExtraServers {
			if in.ExtraServers[i].Name == name {
				f(&in.ExtraServers[i])
			}
		}
	}
}

var stoppedServer = func(s *ServerState) { s.Stopped, s.PodExists, s.PodReady, s.Answered = true, false, false, false }

func TestScaleDown(t *testing.T) {
	tests := []struct {
		name    string
		in      Input
		phase   clusterv1beta1.RemovalPhase // "" for no step
		server  string
		reason  string
		status  metav1.ConditionStatus
		message string
	}{
		{
			name:  "5 to 3 starts with demo-4: its stream replicas are evacuated first",
			in:    scaledDown(group("ORDERS", "demo-2", "demo-3", "demo-4"), group("ONE", "demo-4")),
			phase: clusterv1beta1.RemovalEvacuating, server: "demo-4", reason: clusterv1beta1.ReasonScalingDown, status: metav1.ConditionTrue,
			message: "removing demo-4 (demo-4, demo-3 to remove): moving its replicas of $G/ONE, $G/ORDERS to the other servers",
		},
		{
			name:   "an evacuation waits for the gate, touching nothing",
			in:     scaledDown(group("ORDERS", "demo-2", "demo-3", "demo-4"), unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "ORDERS is catching up")),
			reason: clusterv1beta1.ReasonScalingDown, status: metav1.ConditionTrue,
			message: "removing demo-4 (demo-4, demo-3 to remove): moving its replicas of $G/ORDERS to the other servers; waiting for Settled: ORDERS is catching up",
		},
		{
			name: "a leaving meta leader with no replicas hands leadership over to the lowest current server",
			in: scaledDown(leader("demo-4"), func(in *Input) {
				in.Observation.MetaCurrent = []string{"demo-0", "demo-1", "demo-2", "demo-3", "demo-4"}
			}),
			phase: clusterv1beta1.RemovalSteppingDown, server: "demo-4", reason: clusterv1beta1.ReasonScalingDown, status: metav1.ConditionTrue,
			message: "removing demo-4 (demo-4, demo-3 to remove): handing JetStream meta leadership over",
		},
		{
			name:  "a server with no replicas that does not lead is stopped",
			in:    scaledDown(group("ORDERS", "demo-0", "demo-1", "demo-2")),
			phase: clusterv1beta1.RemovalStopping, server: "demo-4", reason: clusterv1beta1.ReasonScalingDown, status: metav1.ConditionTrue,
			message: "removing demo-4 (demo-4, demo-3 to remove): stopping it",
		},
		{
			name:  "a stopped server still in the meta group is removed from it, whatever the gate says",
			in:    scaledDown(extra("demo-4", stoppedServer), unsettled(clusterv1beta1.ReasonMembersOffline, "demo-4 is offline")),
			phase: clusterv1beta1.RemovalRemovingPeer, server: "demo-4", reason: clusterv1beta1.ReasonScalingDown, status: metav1.ConditionTrue,
			message: "removing demo-4 (demo-4, demo-3 to remove): removing it from the JetStream meta group",
		},
		{
			name:  "a stopped server the meta group no longer lists has its objects deleted",
			in:    scaledDown(extra("demo-4", stoppedServer), metaMembers("demo-0", "demo-1", "demo-2", "demo-3")),
			phase: clusterv1beta1.RemovalDeleting, server: "demo-4", reason: clusterv1beta1.ReasonScalingDown, status: metav1.ConditionTrue,
			message: "removing demo-4 (demo-4, demo-3 to remove): deleting its ConfigMap, claim and StatefulSet",
		},
		{
			name: "once demo-4 is gone, demo-3 is next",
			in: scaledDown(func(in *Input) { in.ExtraServers = in.ExtraServers[:1] }, metaMembers("demo-0", "demo-1", "demo-2", "demo-3"),
				group("ORDERS", "demo-0", "demo-1", "demo-3")),
			phase: clusterv1beta1.RemovalEvacuating, server: "demo-3", reason: clusterv1beta1.ReasonScalingDown, status: metav1.ConditionTrue,
			message: "removing demo-3 (demo-3 to remove): moving its replicas of $G/ORDERS to the other servers",
		},
		{
			name:   "a stopped server's membership is not trusted without an observed meta leader: it waits",
			in:     scaledDown(extra("demo-4", stoppedServer), unobserved("no server answered")),
			reason: clusterv1beta1.ReasonScalingDown, status: metav1.ConditionTrue,
			message: "removing demo-4 (demo-4, demo-3 to remove): waiting for the JetStream meta group to be observed with a leader",
		},
		{
			name:   "a stream with more replicas than the new size holds the scale-down, naming it and the way out",
			in:     scaledDown(group("WIDE", "demo-0", "demo-1", "demo-2", "demo-3", "demo-4")),
			reason: clusterv1beta1.ReasonScaleDownBlocked, status: metav1.ConditionFalse,
			message: "scale-down held before demo-4: $G/WIDE (5 replicas) has more replicas than the 3 servers spec.replicas leaves: lower them (nats stream edit <stream> --replicas 3) or set spec.replicas back to 5; no server was changed by this hold",
		},
		{
			name:   "without system access the scale-down holds and says which field enables it",
			in:     scaledDown(group("ORDERS", "demo-2", "demo-3", "demo-4"), cannotReload("reloads need spec.auth.systemCredentials")),
			reason: clusterv1beta1.ReasonScaleDownBlocked, status: metav1.ConditionFalse,
			message: "scale-down held before demo-4: removing demo-4 needs $SYS to move its replicas and remove its JetStream peer: reloads need spec.auth.systemCredentials; no server was changed by this hold",
		},
		{
			name:   "a stopped server that still holds replicas is held: only starting it again gets them back",
			in:     scaledDown(extra("demo-4", stoppedServer), group("ONE", "demo-4")),
			reason: clusterv1beta1.ReasonScaleDownBlocked, status: metav1.ConditionFalse,
			message: "scale-down held before demo-4: demo-4 is stopped but still holds replicas of $G/ONE: set spec.replicas back to 5 to start it and let the scale-down move them; no server was changed by this hold",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tableCase(t, tt.in)
			switch {
			case tt.phase == "" && d.Step != nil:
				t.Errorf("Step = %s, want none", toJSON(d.Step))
			case tt.phase != "" && (d.Step == nil || d.Step.Kind != RemoveServer || d.Step.Remove == nil ||
				d.Step.Remove.Server != tt.server || d.Step.Remove.Phase != tt.phase):
				t.Errorf("Step = %s, want RemoveServer %s %s", toJSON(d.Step), tt.server, tt.phase)
			}
			if len(d.Create) > 0 {
				t.Errorf("Create = %v during a scale-down", d.Create)
			}
			if d.Progressing.Status != tt.status || d.Progressing.Reason != tt.reason || d.Progressing.Message != tt.message {
				t.Errorf("Progressing = %s %s %q\nwant %s %s %q", d.Progressing.Status, d.Progressing.Reason, d.Progressing.Message, tt.status, tt.reason, tt.message)
			}
			if tt.phase != "" && (len(d.Removals) != 1 || d.Removals[0] != (clusterv1beta1.ServerRemoval{Server: tt.server, Phase: tt.phase})) {
				t.Errorf("Removals = %+v, want %s %s", d.Removals, tt.server, tt.phase)
			}
		})
	}
}

// The successor of a leaving meta leader is a current member of the spec.
func TestSteppingDownNamesACurrentSuccessor(t *testing.T) {
	in := scaledDown(leader("demo-4"), func(in *Input) { in.Observation.MetaCurrent = []string{"demo-1", "demo-4"} })
	d := Plan(in)
	if d.Step == nil || d.Step.Remove == nil || d.Step.Remove.Successor != "demo-1" {
		t.Errorf("step %s, want a step-down to demo-1", toJSON(d.Step))
	}
}
