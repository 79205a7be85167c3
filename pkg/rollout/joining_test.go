package rollout

import (
	"strings"
	"testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// A gateway remote added to a cluster with JetStream, naming a cluster
// that runs a meta group of its own and that no server reaches yet, would
// merge two meta groups one server at a time: held OwnMetaGroup, naming
// the remote and the streams, with no step; restart-all does not release
// it. A remote already reached (through another member), or one without
// JetStream, rolls one server at a time as before.
func TestARemoteJoiningTwoMetaGroupsIsHeld(t *testing.T) {
	withWest := running(func(f *ConfigFacts) { f.Gateway, f.GatewayRemotes = true, "west=nats://west-headless.west.svc:7222" })
	addNorth := target(func(f *ConfigFacts) {
		f.Gateway, f.GatewayRemotes = true, "north=nats://north-headless.north.svc:7222; west=nats://west-headless.west.svc:7222"
	})
	northRunsJetStream := func(in *Input) { in.JetStreamRemotes = []string{"north", "west"} }
	reaches := func(names ...string) opt { return func(in *Input) { in.Observation.Gateways = names } }
	tests := []struct {
		name     string
		in       Input
		held     bool
		contains []string
	}{
		{"north runs JetStream and no server reaches it", cluster(3, withWest, addNorth, northRunsJetStream, reaches("west"), streams(orders)), true,
			[]string{"adding the gateway remote north cannot be done on a running cluster with JetStream", "it holds 1 stream (ORDERS in the global account)", "Remove the remote to go back"}},
		{"the same with restart-all", cluster(3, withWest, addNorth, northRunsJetStream, reaches("west"), annotate(restartAllKey, "")), true, nil},
		{"north already reached through west", cluster(3, withWest, addNorth, northRunsJetStream, reaches("north", "west")), false, nil},
		{"north runs no JetStream", cluster(3, withWest, addNorth, reaches("west")), false, nil},
		{"this cluster runs no JetStream", cluster(3, noJetStream, withWest, addNorth, northRunsJetStream, reaches("west")), false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.in)
			t.Logf("Progressing %s %s: %s", d.Progressing.Status, d.Progressing.Reason, d.Progressing.Message)
			held := d.Hold != nil && d.Hold.Reason == clusterv1beta1.ReasonOwnMetaGroup && d.Step == nil
			if held != tc.held {
				t.Fatalf("held OwnMetaGroup %t, want %t (step %+v)", held, tc.held, d.Step)
			}
			if !tc.held && (d.Step == nil || d.Step.Kind != RestartOne) {
				t.Errorf("want a restart of one server, got step %+v", d.Step)
			}
			for _, c := range tc.contains {
				if !strings.Contains(d.Progressing.Message, c) {
					t.Errorf("the message lacks %q", c)
				}
			}
		})
	}
}
