package rollout

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

const (
	restartAllKey = clusterv1beta1.AnnotationRestartAll
	forceStepKey  = clusterv1beta1.AnnotationForceStep
)

var (
	joinWest = target(func(f *ConfigFacts) { f.Gateway, f.GatewayRemotes = true, "west=nats://west-headless.west.svc:7222" })
	// noJetStream: the servers run, and the spec keeps, no JetStream.
	noJetStream = func(in *Input) {
		in.Target.JetStream = false
		for i := range in.Servers {
			in.Servers[i].Running.JetStream = false
		}
	}
	addAuth    = target(func(f *ConfigFacts) { f.Operator, f.SystemAccount = opA, sysA })
	removeAuth = running(func(f *ConfigFacts) { f.Operator, f.SystemAccount = opA, sysA })
	orders     = StreamRef{Account: GlobalAccount, Name: "ORDERS"}
	events     = StreamRef{Account: GlobalAccount, Name: "EVENTS"}
)

// want is what a case asserts: structured fields always, message text only
// where the case gives it.
type want struct {
	step       *Step
	holdReason string
	waitingFor string
	status     metav1.ConditionStatus
	reason     string
	message    string   // exact, when set
	contains   []string // substrings of the message
	rollout    *clusterv1beta1.RolloutStatus
	anyRollout bool // do not compare rollout
	clear      []string
	changes    []ChangeKind
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want want
	}{
		{
			name: "a cluster with JetStream and streams gaining a gateway is held with OwnMetaGroup naming its meta group and the remotes, and restart-all does not release it",
			in:   cluster(3, joinWest, streams(orders), annotate(restartAllKey, "")),
			want: want{
				holdReason: clusterv1beta1.ReasonOwnMetaGroup, waitingFor: "spec.gateway",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonOwnMetaGroup,
				contains: []string{"adding the gateway cannot be done on a running cluster with JetStream",
					"demo runs a JetStream meta group of its own (leader demo-0); it holds 1 stream (ORDERS in the global account)",
					"the supercluster of west has another", "Remove spec.gateway to go back"},
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}},
				changes: []ChangeKind{ChangeGateway},
			},
		},
		{
			name: "a cluster in a supercluster with JetStream losing its gateway is held with OwnMetaGroup",
			in:   cluster(3, running(func(f *ConfigFacts) { f.Gateway, f.GatewayRemotes = true, "west=nats://west-headless.west.svc:7222" })),
			want: want{
				holdReason: clusterv1beta1.ReasonOwnMetaGroup, waitingFor: "spec.gateway",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonOwnMetaGroup,
				contains: []string{"removing the gateway cannot be done on a running cluster with JetStream",
					"demo's servers are peers of the JetStream meta group of the supercluster of west", "Put spec.gateway back"},
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}},
				changes: []ChangeKind{ChangeGateway},
			},
		},
		{
			name: "a cluster without JetStream gaining a gateway is held with GatewayChangeBlocked until restart-all",
			in:   cluster(3, noJetStream, joinWest),
			want: want{
				holdReason: clusterv1beta1.ReasonGatewayChangeBlocked, waitingFor: restartAllKey,
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonGatewayChangeBlocked,
				contains: []string{"adding or removing the gateway (off -> on) cannot roll out one server at a time", "restart demo-2, demo-1, demo-0 together"},
				rollout:  &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}},
				changes:  []ChangeKind{ChangeGateway},
			},
		},
		{
			name: "another gateway remote restarts the servers one at a time, highest ordinal first",
			in: cluster(3, running(func(f *ConfigFacts) { f.Gateway, f.GatewayRemotes = true, "west=nats://west-headless.west.svc:7222" }),
				target(func(f *ConfigFacts) {
					f.Gateway, f.GatewayRemotes = true, "north=nats://north-headless.north.svc:7222; west=nats://west-headless.west.svc:7222"
				})),
			want: want{
				step:       &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				anyRollout: true, status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				changes: []ChangeKind{ChangeGatewayRemotes},
			},
		},
		{
			name: "servers running without auth with a spec adding auth are held with AuthChangeBlocked, every server pending and no step",
			in:   cluster(3, addAuth),
			want: want{
				holdReason: clusterv1beta1.ReasonAuthChangeBlocked, waitingFor: restartAllKey,
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonAuthChangeBlocked,
				message: "adding auth cannot roll out one server at a time: a server with auth and one without cannot route to each other; " +
					"annotate the NatsCluster cluster.nats-operator.io/restart-all to restart demo-2, demo-1, demo-0 together, or recreate it",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}},
				changes: []ChangeKind{ChangeAddAuth},
			},
		},
		{
			name: "adding auth is held before anything else even when the cluster cannot be observed",
			in:   cluster(3, addAuth, unobserved("receive $SYS.REQ.SERVER.PING.STATSZ: nats: no responders available for request"), streams(orders)),
			want: want{
				holdReason: clusterv1beta1.ReasonAuthChangeBlocked, waitingFor: restartAllKey + "=reset-jetstream",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonAuthChangeBlocked,
				contains: []string{"the streams it holds are unknown", "restart-all=reset-jetstream"},
				rollout:  &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}},
				changes:  []ChangeKind{ChangeAddAuth},
			},
		},
		{
			name: "adding auth while demo-1 leads the meta group still lists every server highest ordinal first, since they restart together",
			in:   cluster(3, addAuth, leader("demo-1")),
			want: want{
				holdReason: clusterv1beta1.ReasonAuthChangeBlocked, waitingFor: restartAllKey,
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonAuthChangeBlocked,
				contains: []string{"restart demo-2, demo-1, demo-0 together"},
				rollout:  &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}},
				changes:  []ChangeKind{ChangeAddAuth},
			},
		},
		{
			name: "removing auth is held with AuthChangeBlocked the same way",
			in:   cluster(3, removeAuth),
			want: want{
				holdReason: clusterv1beta1.ReasonAuthChangeBlocked, waitingFor: restartAllKey,
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonAuthChangeBlocked,
				contains: []string{"removing auth cannot roll out one server at a time", "restart demo-2, demo-1, demo-0 together"},
				rollout:  &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}},
				changes:  []ChangeKind{ChangeRemoveAuth},
			},
		},
		{
			name: "adding auth with restart-all and no streams is one step restarting all three servers together",
			in:   cluster(3, addAuth, annotate(restartAllKey, "")),
			want: want{
				step:   &Step{Kind: RestartAll, Servers: []string{"demo-2", "demo-1", "demo-0"}, ResetJetStream: true, ResetWhy: "the system account changes"},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-2, demo-1, demo-0 together; JetStream starts empty because the system account changes",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Updated: []string{"demo-2", "demo-1", "demo-0"}},
				clear:   []string{restartAllKey},
				changes: []ChangeKind{ChangeAddAuth},
			},
		},
		{
			name: "adding auth with restart-all while streams exist stays held and names the streams and reset-jetstream",
			in:   cluster(3, addAuth, annotate(restartAllKey, "true"), streams(orders, events)),
			want: want{
				holdReason: clusterv1beta1.ReasonAuthChangeBlocked, waitingFor: restartAllKey + "=reset-jetstream",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonAuthChangeBlocked,
				message: "adding auth cannot roll out one server at a time: a server with auth and one without cannot route to each other; " +
					"annotate the NatsCluster cluster.nats-operator.io/restart-all to restart demo-2, demo-1, demo-0 together, or recreate it; " +
					"JetStream will start empty because the system account changes; 2 streams would be left behind (EVENTS, ORDERS in the global account): " +
					"back them up, then annotate cluster.nats-operator.io/restart-all=reset-jetstream " +
					"(cluster.nats-operator.io/restart-all without reset-jetstream is not acted on)",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}},
				changes: []ChangeKind{ChangeAddAuth},
			},
		},
		{
			name: "adding auth with restart-all=reset-jetstream is one step restarting all three and names the streams left behind",
			in:   cluster(3, addAuth, annotate(restartAllKey, "reset-jetstream"), streams(orders, events)),
			want: want{
				step: &Step{Kind: RestartAll, Servers: []string{"demo-2", "demo-1", "demo-0"}, ResetJetStream: true, ResetWhy: "the system account changes",
					StreamsLeftBehind: []StreamRef{events, orders}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-2, demo-1, demo-0 together; JetStream starts empty because the system account changes: " +
					"2 streams left behind on the volumes (EVENTS, ORDERS in the global account)",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Updated: []string{"demo-2", "demo-1", "demo-0"}},
				clear:   []string{restartAllKey},
				changes: []ChangeKind{ChangeAddAuth},
			},
		},
		{
			name: "a hold names five streams and says how many more",
			in: cluster(3, addAuth, streams(
				StreamRef{GlobalAccount, "A"}, StreamRef{GlobalAccount, "B"}, StreamRef{GlobalAccount, "C"},
				StreamRef{GlobalAccount, "D"}, StreamRef{appA, "E"}, StreamRef{appA, "F"}, StreamRef{appA, "G"})),
			want: want{
				holdReason: clusterv1beta1.ReasonAuthChangeBlocked, waitingFor: restartAllKey + "=reset-jetstream",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonAuthChangeBlocked,
				contains:   []string{"7 streams would be left behind (A, B, C, D in the global account; E in account " + appA + ", and 2 more)"},
				anyRollout: true, changes: []ChangeKind{ChangeAddAuth},
			},
		},
		{
			name: "a split found mid-rollout (one server already on auth) still holds with every server pending",
			in:   cluster(3, addAuth, stepped("demo-2"), unsettled(clusterv1beta1.ReasonServersSilent, "demo-2 did not answer")),
			want: want{
				holdReason: clusterv1beta1.ReasonAuthChangeBlocked, waitingFor: restartAllKey,
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonAuthChangeBlocked,
				contains: []string{"restart demo-2, demo-1, demo-0 together"},
				rollout:  &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}},
				changes:  []ChangeKind{ChangeAddAuth},
			},
		},
		{
			name: "another cluster name is held with UnsupportedChange naming what changed",
			in:   cluster(3, target(func(f *ConfigFacts) { f.ClusterName = "other" })),
			want: want{
				holdReason: clusterv1beta1.ReasonUnsupportedChange, waitingFor: restartAllKey,
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonUnsupportedChange,
				contains:   []string{"another cluster name (demo -> other) cannot roll out one server at a time", "restart-all to restart demo-2, demo-1, demo-0 together"},
				anyRollout: true, changes: []ChangeKind{ChangeClusterName},
			},
		},
		{
			name: "another system account while streams exist is held and asks for reset-jetstream",
			in:   cluster(3, running(func(f *ConfigFacts) { *f = authFacts(opA, sysA) }), target(func(f *ConfigFacts) { *f = authFacts(opA, sysB) }), streams(StreamRef{appA, "ORDERS"})),
			want: want{
				holdReason: clusterv1beta1.ReasonUnsupportedChange, waitingFor: restartAllKey + "=reset-jetstream",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonUnsupportedChange,
				contains:   []string{"another system account", "1 stream would be left behind (ORDERS in account " + appA + ")", "restart-all=reset-jetstream"},
				anyRollout: true, changes: []ChangeKind{ChangeSystemAccount},
			},
		},
		{
			name: "another NATS operator with restart-all=reset-jetstream restarts every server together",
			in: cluster(3, running(func(f *ConfigFacts) { *f = authFacts(opA, sysA) }), target(func(f *ConfigFacts) { *f = authFacts(opB, sysB) }),
				streams(StreamRef{appA, "ORDERS"}), annotate(restartAllKey, "reset-jetstream")),
			want: want{
				step:   &Step{Kind: RestartAll, Servers: []string{"demo-2", "demo-1", "demo-0"}, ResetJetStream: true, ResetWhy: "the system account changes", StreamsLeftBehind: []StreamRef{{appA, "ORDERS"}}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				anyRollout: true, clear: []string{restartAllKey}, changes: []ChangeKind{ChangeOperator},
			},
		},
		{
			name: "moving from one JetStream domain to another is held with UnsupportedChange",
			in:   cluster(3, running(func(f *ConfigFacts) { f.JetStreamDomain = "east" }), target(func(f *ConfigFacts) { f.JetStreamDomain = "west" })),
			want: want{
				holdReason: clusterv1beta1.ReasonUnsupportedChange, waitingFor: restartAllKey,
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonUnsupportedChange,
				contains:   []string{"another JetStream domain (east -> west) cannot roll out one server at a time: servers in different JetStream domains route but cannot form one JetStream meta group"},
				anyRollout: true, changes: []ChangeKind{ChangeJetStreamDomain},
			},
		},
		{
			name: "adding a JetStream domain rolls one server at a time",
			in:   cluster(3, target(func(f *ConfigFacts) { f.JetStreamDomain = "hub" })),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
				changes: []ChangeKind{ChangeJetStreamDomainAddRemove},
			},
		},
		{
			name: "turning JetStream on is held with UnsupportedChange and nothing is reset",
			in:   cluster(3, running(func(f *ConfigFacts) { f.JetStream = false }), metaMembers(), streams(orders)),
			want: want{
				holdReason: clusterv1beta1.ReasonUnsupportedChange, waitingFor: restartAllKey,
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonUnsupportedChange,
				contains:   []string{"turning JetStream on or off (off -> on) cannot roll out one server at a time"},
				anyRollout: true, changes: []ChangeKind{ChangeJetStream},
			},
		},
		{
			name: "force-step does not push a server through a held transition",
			in:   cluster(3, addAuth, annotate(forceStepKey, "demo-2")),
			want: want{
				holdReason: clusterv1beta1.ReasonAuthChangeBlocked, waitingFor: restartAllKey,
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonAuthChangeBlocked,
				anyRollout: true, changes: []ChangeKind{ChangeAddAuth},
			},
		},
		{
			name: "a closed gate before the first step waits for Settled before restarting demo-2",
			in:   cluster(3, unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "stream ORDERS: demo-1 is catching up")),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "before restarting demo-2 (1 of 3); waiting for Settled",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}, Gate: gate(clusterv1beta1.GateSettled, t0)},
			},
		},
		{
			name: "a gate closed for twelve minutes on the same check reads GateBlocked with the detail and keeps its since",
			in: cluster(3, unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "stream ORDERS: demo-1 is catching up"), at(12*time.Minute),
				previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}, Gate: gate(clusterv1beta1.GateSettled, t0)})),
			want: want{
				holdReason: clusterv1beta1.ReasonGateBlocked, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonGateBlocked,
				message: "before restarting demo-2 (1 of 3); waiting for Settled for 12m: stream ORDERS: demo-1 is catching up",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}, Gate: gate(clusterv1beta1.GateSettled, t0)},
			},
		},
		{
			name: "a gate closed for nine minutes still reads RollingRestart",
			in: cluster(3, unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "x"), at(9*time.Minute),
				previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Gate: gate(clusterv1beta1.GateSettled, t0)})),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "a gate that closes on another check starts its since again",
			in: cluster(3, notReady("demo-1"), at(30*time.Minute),
				previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}, Gate: gate(clusterv1beta1.GateSettled, t0)})),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GatePodsReady,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "before restarting demo-2 (1 of 3); waiting for PodsReady",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}, Gate: gate(clusterv1beta1.GatePodsReady, ts(30*time.Minute))},
			},
		},
		{
			name: "a gate since from a previous target revision is not carried over",
			in: cluster(3, unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "x"), at(30*time.Minute),
				previous(&clusterv1beta1.RolloutStatus{TargetRevision: "older", Gate: gate(clusterv1beta1.GateSettled, t0)})),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}, Gate: gate(clusterv1beta1.GateSettled, ts(30*time.Minute))},
			},
		},
		{
			name: "an unobserved cluster waits for Observed and says why once blocked",
			in: cluster(3, unobserved("GET http://10.0.0.3:8222/varz: connection refused"), at(11*time.Minute),
				previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Gate: gate(clusterv1beta1.GateObserved, t0)})),
			want: want{
				holdReason: clusterv1beta1.ReasonGateBlocked, waitingFor: clusterv1beta1.GateObserved,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonGateBlocked,
				message:    "before restarting demo-2 (1 of 3); waiting for Observed for 11m: GET http://10.0.0.3:8222/varz: connection refused",
				anyRollout: true,
			},
		},
		{
			name: "an open gate steps the highest ordinal first",
			in:   cluster(3),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-2 (1 of 3)",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-2", Pending: []string{"demo-1", "demo-0"}},
			},
		},
		{
			name: "the JetStream meta leader goes last",
			in:   cluster(3, leader("demo-2")),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-1"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-1", Pending: []string{"demo-0", "demo-2"}},
			},
		},
		{
			name: "the meta leader is stepped once it is the only server left",
			in:   cluster(3, stepped("demo-2", "demo-1"), previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-1", Updated: []string{"demo-2"}, Pending: []string{"demo-0"}})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-0"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-0 (3 of 3)",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-0", Updated: []string{"demo-2", "demo-1"}},
			},
		},
		{
			name: "a stepped server whose pod is not Ready yet stays current and the rollout waits",
			in:   cluster(3, restarting("demo-1"), stepped("demo-2"), previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-1", Updated: []string{"demo-2"}, Pending: []string{"demo-0"}})),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-1 (2 of 3); waiting for Settled",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-1", Updated: []string{"demo-2"}, Pending: []string{"demo-0"}, Gate: gate(clusterv1beta1.GateSettled, t0)},
			},
		},
		{
			name: "current stays put while its gate is closed even after its pod is Ready",
			in: cluster(3, stepped("demo-2"), unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "stream ORDERS: demo-2 is catching up"),
				previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-2", Pending: []string{"demo-1", "demo-0"}})),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-2 (1 of 3); waiting for Settled",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-2", Pending: []string{"demo-1", "demo-0"}, Gate: gate(clusterv1beta1.GateSettled, t0)},
			},
		},
		{
			name: "a stepped server that reports the old revision closes the gate on TargetRevision",
			in:   cluster(3, stepped("demo-2"), reports("demo-2", oldRev)),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateTargetRevision,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message:    "restarting demo-2 (1 of 3); waiting for TargetRevision",
				anyRollout: true,
			},
		},
		{
			// The controller died after the step wrote demo-1's template
			// and ConfigMap, before it deleted the pod: under OnDelete the
			// old pod runs on and would never report the target.
			name: "a server whose objects are at the target but whose pod was started from the older template is stepped again, not waited for",
			in: cluster(3, stepped("demo-2"), stepped("demo-1"), reports("demo-1", oldRev), podBehind("demo-1"),
				previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-1", Updated: []string{"demo-2"}, Pending: []string{"demo-0"}})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-1"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				contains:   []string{"restarting demo-1 (2 of 3)"},
				anyRollout: true,
			},
		},
		{
			name: "a server missing from the JetStream meta group closes the gate on MetaMembership",
			in:   cluster(3, metaMembers("demo-0", "demo-2"), at(15*time.Minute), previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Gate: gate(clusterv1beta1.GateMetaMembership, t0)})),
			want: want{
				holdReason: clusterv1beta1.ReasonGateBlocked, waitingFor: clusterv1beta1.GateMetaMembership,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonGateBlocked,
				message:    "before restarting demo-2 (1 of 3); waiting for MetaMembership for 15m: demo-1 is not in the JetStream meta group",
				anyRollout: true,
			},
		},
		{
			name: "without JetStream the meta group is not checked",
			in:   cluster(3, metaMembers(), running(func(f *ConfigFacts) { f.JetStream = false }), target(func(f *ConfigFacts) { f.JetStream = false })),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "a paused rollout holds with RolloutPaused",
			in:   cluster(3, paused()),
			want: want{
				holdReason: clusterv1beta1.ReasonRolloutPaused,
				status:     metav1.ConditionTrue, reason: clusterv1beta1.ReasonRolloutPaused,
				message: "rollout paused before restarting demo-2 (1 of 3)",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Pending: []string{"demo-2", "demo-1", "demo-0"}},
			},
		},
		{
			name: "force-step takes the named server through a closed gate and asks to clear the annotation",
			in:   cluster(3, notReady("demo-0"), annotate(forceStepKey, "demo-0")),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-0"}, Forced: true},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-0 (1 of 3), forced by cluster.nats-operator.io/force-step through the closed gate (waiting for PodsReady)",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-0", Pending: []string{"demo-2", "demo-1"}},
				clear:   []string{forceStepKey},
			},
		},
		{
			name: "force-step takes the named server through a pause",
			in:   cluster(3, paused(), annotate(forceStepKey, "demo-1")),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-1"}, Forced: true},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message:    "restarting demo-1 (1 of 3), forced by cluster.nats-operator.io/force-step through the pause",
				anyRollout: true, clear: []string{forceStepKey},
			},
		},
		{
			name: "force-step naming a server with no step left is cleared and the rollout goes on",
			in:   cluster(3, stepped("demo-2"), annotate(forceStepKey, "demo-2"), previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-2"})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-1"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-1 (2 of 3)",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-1", Updated: []string{"demo-2"}, Pending: []string{"demo-0"}},
				clear:   []string{forceStepKey},
			},
		},
		{
			name: "restart-all on a change that rolls restarts every server together through a closed gate",
			in:   cluster(3, annotate(restartAllKey, ""), unsettled(clusterv1beta1.ReasonMembersOffline, "x"), target(func(f *ConfigFacts) { f.Version = "2.15.3" })),
			want: want{
				step:   &Step{Kind: RestartAll, Servers: []string{"demo-2", "demo-1", "demo-0"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-2, demo-1, demo-0 together", anyRollout: true,
				clear: []string{restartAllKey}, changes: []ChangeKind{ChangeVersion},
			},
		},
		{
			name: "a version bump, lowered JetStream limits, server tags and accounts roll one server at a time",
			in: cluster(3, running(func(f *ConfigFacts) { *f = authFacts(opA, sysA) }), target(func(f *ConfigFacts) {
				*f = authFacts(opA, sysA)
				f.Version, f.MaxFileStore, f.ServerTags, f.Accounts = "2.15.3", 1, []string{"az:1"}, []string{appA}
			})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
				changes: []ChangeKind{ChangeVersion, ChangeJetStreamLimitsLowered, ChangeServerTags, ChangeAccounts},
			},
		},
		{
			name: "restart-all with nothing left to step is cleared and the cluster is up to date",
			in:   cluster(3, stepped("demo-0", "demo-1", "demo-2"), converged(newRev), annotate(restartAllKey, "reset-jetstream")),
			want: want{
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonUpToDate,
				message: "3 servers run at revision new",
				clear:   []string{restartAllKey},
			},
		},
		{
			name: "a cluster on the target revision is up to date with no rollout status",
			in:   cluster(3, stepped("demo-0", "demo-1", "demo-2"), converged(newRev)),
			want: want{status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonUpToDate},
		},
		{
			name: "a crashed pod in a converged cluster is no rollout: Ready reports it",
			in:   cluster(3, stepped("demo-0", "demo-1", "demo-2"), converged(newRev), notReady("demo-1"), unsettled(clusterv1beta1.ReasonServersSilent, "demo-1")),
			want: want{status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonUpToDate},
		},
		{
			name: "a new cluster being created is Creating with no step",
			in:   cluster(3, creating()),
			want: want{
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonCreating,
				message: "creating 3 servers at revision new; waiting for Observed",
			},
		},
		{
			name: "a new cluster whose pods exist but are not Ready is still Creating",
			in: cluster(3, creating(), stepped("demo-0", "demo-1", "demo-2"), notReady("demo-0"), notReady("demo-1"), notReady("demo-2"),
				func(in *Input) { in.Observation = cluster(3).Observation }),
			want: want{status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonCreating, message: "creating 3 servers at revision new; waiting for PodsReady"},
		},
		{
			name: "a new cluster whose servers all run the target and settled is up to date",
			in: cluster(3, creating(), stepped("demo-0", "demo-1", "demo-2"), func(in *Input) { in.Observation = cluster(3).Observation }, func(in *Input) {
				for i := range in.Servers {
					in.Servers[i].PodExists, in.Servers[i].PodReady, in.Servers[i].Answered = true, true, true
				}
			}),
			want: want{status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonUpToDate},
		},
		{
			name: "after the last step the rollout waits for Settled with the last server current",
			in: cluster(3, stepped("demo-2", "demo-1", "demo-0"), unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "x"),
				previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-0", Updated: []string{"demo-2", "demo-1"}})),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-0 (3 of 3); waiting for Settled",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-0", Updated: []string{"demo-2", "demo-1"}, Gate: gate(clusterv1beta1.GateSettled, t0)},
			},
		},
		{
			name: "after restart-all the rollout waits for every pod with no current server",
			in:   cluster(3, restarting("demo-2"), restarting("demo-1"), restarting("demo-0")),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarted 3 of 3 servers; waiting for Settled",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Updated: []string{"demo-2", "demo-1", "demo-0"}, Gate: gate(clusterv1beta1.GateSettled, t0)},
			},
		},
		{
			name: "after the last step with the gate open and every server on the target the cluster is up to date",
			in:   cluster(3, stepped("demo-2", "demo-1", "demo-0"), previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-0"})),
			want: want{status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonUpToDate},
		},
		{
			name: "a spec changed mid-rollout drops the old current and steps toward the new target",
			in: cluster(3, func(in *Input) {
				objectsAt(server(in, "demo-2"), "mid")
				server(in, "demo-2").ReportedRevision = "mid"
			},
				previous(&clusterv1beta1.RolloutStatus{TargetRevision: "mid", Current: "demo-2", Pending: []string{"demo-1", "demo-0"}})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-2", Pending: []string{"demo-1", "demo-0"}},
			},
		},
		{
			name: "seven servers step from demo-6 down with the leader last",
			in:   cluster(7, leader("demo-5")),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-6"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-6 (1 of 7)",
				rollout: &clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-6", Pending: []string{"demo-4", "demo-3", "demo-2", "demo-1", "demo-0", "demo-5"}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tableCase(t, tc.in)
			checkDecision(t, got, tc.want)
			// The input order of servers never matters.
			shuffled := tc.in
			shuffled.Servers = slices.Clone(tc.in.Servers)
			slices.Reverse(shuffled.Servers)
			if again := Plan(shuffled); !reflect.DeepEqual(again, got) {
				t.Errorf("Plan with servers in another order differs:\n%s\nvs\n%s", toJSON(again), toJSON(got))
			}
		})
	}
}

func checkDecision(t *testing.T, got Decision, w want) {
	t.Helper()
	if got.Step != nil && got.Hold != nil {
		t.Fatalf("both a step and a hold: %s", toJSON(got))
	}
	if !reflect.DeepEqual(got.Step, w.step) {
		t.Errorf("step = %s, want %s", toJSON(got.Step), toJSON(w.step))
	}
	var holdReason, waitingFor string
	if got.Hold != nil {
		holdReason, waitingFor = got.Hold.Reason, got.Hold.WaitingFor
		if got.Hold.Message != got.Progressing.Message {
			t.Errorf("hold message %q differs from the Progressing message %q", got.Hold.Message, got.Progressing.Message)
		}
	}
	if holdReason != w.holdReason || waitingFor != w.waitingFor {
		t.Errorf("hold = %q waiting for %q, want %q waiting for %q", holdReason, waitingFor, w.holdReason, w.waitingFor)
	}
	p := got.Progressing
	if p.Type != clusterv1beta1.ConditionProgressing || p.Status != w.status || p.Reason != w.reason {
		t.Errorf("Progressing = %s %s %s, want %s %s", p.Type, p.Status, p.Reason, w.status, w.reason)
	}
	if w.message != "" && p.Message != w.message {
		t.Errorf("message =\n  %q\nwant\n  %q", p.Message, w.message)
	}
	for _, s := range w.contains {
		if !strings.Contains(p.Message, s) {
			t.Errorf("message %q does not contain %q", p.Message, s)
		}
	}
	// The restart reason is the reload tests' (reload_test.go) to check.
	if !w.anyRollout && !reflect.DeepEqual(withoutRestartReason(got.Rollout), w.rollout) {
		t.Errorf("rollout = %s\nwant %s", toJSON(got.Rollout), toJSON(w.rollout))
	}
	if !slices.Equal(got.ClearAnnotations, w.clear) {
		t.Errorf("clear annotations = %v, want %v", got.ClearAnnotations, w.clear)
	}
	var kinds []ChangeKind
	for _, c := range got.Changes {
		kinds = append(kinds, c.Kind)
	}
	if !slices.Equal(kinds, w.changes) {
		t.Errorf("changes = %v, want %v", kinds, w.changes)
	}
}

func withoutRestartReason(r *clusterv1beta1.RolloutStatus) *clusterv1beta1.RolloutStatus {
	if r == nil || r.RestartReason == "" {
		return r
	}
	c := r.DeepCopy()
	c.RestartReason = ""
	return c
}
