package rollout

import (
	"fmt"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// metaCurrent makes every meta group member current, as a settled cluster
// reports it.
func metaCurrent(in *Input) {
	in.Observation.MetaCurrent = append([]string(nil), in.Observation.MetaMembers...)
}

func acceptQuorumLoss(in *Input) { in.AcceptQuorumLoss = true }

func TestPlanHoldsBeforeARestartThatStopsARaftGroupsWrites(t *testing.T) {
	all := []string{"demo-0", "demo-1", "demo-2"}
	r2 := []string{"demo-1", "demo-2"}
	tests := []struct {
		name string
		in   Input
		want want
	}{
		{
			name: "an R2 stream on the next server holds with QuorumLossOnRestart naming it and the ways out",
			in:   cluster(3, metaCurrent, asset("ORDERS", r2, r2)),
			want: want{
				holdReason: clusterv1beta1.ReasonQuorumLossOnRestart, waitingFor: forceStepKey + "=demo-2",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonQuorumLossOnRestart,
				message: "restarting demo-2 would stop the writes of 1 Raft group until it is back: stream $G/ORDERS is R2: restarting demo-2 stops its writes; " +
					"raise the replicas (3 servers, R3 streams) so that a majority survives one restart, accept it for this step with " +
					"cluster.nats-operator.io/force-step=demo-2, or for every step with spec.rollout.acceptQuorumLoss: true",
				anyRollout: true,
			},
		},
		{
			name: "an R2 consumer holds the same way, named as a consumer",
			in:   cluster(3, metaCurrent, asset("ORDERS", all, all), asset("ORDERS/worker", r2, r2)),
			want: want{
				holdReason: clusterv1beta1.ReasonQuorumLossOnRestart, waitingFor: forceStepKey + "=demo-2",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonQuorumLossOnRestart,
				contains:   []string{"consumer $G/ORDERS/worker is R2: restarting demo-2 stops its writes"},
				anyRollout: true,
			},
		},
		{
			name: "an R2 stream on other servers does not hold the next server's step",
			in:   cluster(3, metaCurrent, asset("ORDERS", []string{"demo-0", "demo-1"}, []string{"demo-0", "demo-1"})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "R3 and R1 streams with every replica current roll: a majority survives, and R1 has none to lose",
			in:   cluster(3, metaCurrent, asset("R3", all, all), asset("ONE", []string{"demo-2"}, []string{"demo-2"})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "a 2-server JetStream cluster holds: its meta group needs both servers",
			in:   cluster(2, metaCurrent),
			want: want{
				holdReason: clusterv1beta1.ReasonQuorumLossOnRestart, waitingFor: forceStepKey + "=demo-1",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonQuorumLossOnRestart,
				contains: []string{"restarting demo-1 would stop the writes of 1 Raft group until it is back: the JetStream meta group has 2 members, 2 current, 2 needed for a majority " +
					"(no stream or consumer can be created, changed or deleted)"},
				anyRollout: true,
			},
		},
		{
			name: "force-step naming the server accepts it for this step, and the step carries the groups",
			in:   cluster(3, metaCurrent, asset("ORDERS", r2, r2), annotate(forceStepKey, "demo-2")),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}, Forced: true, QuorumLoss: []string{"stream $G/ORDERS"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
				clear: []string{forceStepKey},
			},
		},
		{
			name: "spec.rollout.acceptQuorumLoss accepts it at every step, and the step carries the groups",
			in:   cluster(2, metaCurrent, acceptQuorumLoss, asset("ORDERS", []string{"demo-0", "demo-1"}, []string{"demo-0", "demo-1"})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-1"}, QuorumLoss: []string{"meta", "stream $G/ORDERS"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "a reload restarts nothing and is not held",
			in:   cluster(3, metaCurrent, canReload, tagged, asset("ORDERS", r2, r2)),
			want: want{
				step:   &Step{Kind: Reload, Reload: &ReloadStep{Server: "demo-2", Revision: newRev, Stage: []string{"demo-1", "demo-0"}}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonReloading, anyRollout: true,
				changes: []ChangeKind{ChangeServerTags},
			},
		},
		{
			name: "a group that lost its majority already is not lowered further by the restart: no hold",
			in:   cluster(3, metaCurrent, asset("ORDERS", r2, []string{"demo-2"})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "a hold names five groups and says how many more",
			in: cluster(3, metaCurrent, asset("A", r2, r2), asset("B", r2, r2), asset("C", r2, r2),
				asset("D", r2, r2), asset("E", r2, r2), asset("F", r2, r2), asset("G", r2, r2)),
			want: want{
				holdReason: clusterv1beta1.ReasonQuorumLossOnRestart, waitingFor: forceStepKey + "=demo-2",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonQuorumLossOnRestart,
				contains:   []string{"would stop the writes of 7 Raft groups", "stream $G/E is R2", "; and 2 more; raise"},
				anyRollout: true,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkDecision(t, tableCase(t, tc.in), tc.want)
		})
	}
}

func TestFaultTolerance(t *testing.T) {
	all := []string{"demo-0", "demo-1", "demo-2"}
	r2 := []string{"demo-1", "demo-2"}
	type group struct {
		name           string
		replicas, curr int
		tolerates      int
	}
	tests := []struct {
		name      string
		in        Input
		ok        bool
		tolerates int
		groups    []group
	}{
		{name: "nothing is known without an observation", in: cluster(3, metaCurrent, unobserved("no server answered"))},
		{name: "3 servers, R3 streams: one server", in: cluster(3, metaCurrent, asset("R3", all, all)), ok: true, tolerates: 1,
			groups: []group{{"meta", 3, 3, 1}, {"stream $G/R3", 3, 3, 1}}},
		{name: "an R2 stream makes it none, listed first", in: cluster(3, metaCurrent, asset("R3", all, all), asset("ORDERS", r2, r2)), ok: true, tolerates: 0,
			groups: []group{{"stream $G/ORDERS", 2, 2, 0}, {"meta", 3, 3, 1}, {"stream $G/R3", 3, 3, 1}}},
		{name: "a 2-server cluster: none, its meta group needs both", in: cluster(2, metaCurrent), ok: true, tolerates: 0,
			groups: []group{{"meta", 2, 2, 0}}},
		{name: "5 servers: two", in: cluster(5, metaCurrent), ok: true, tolerates: 2, groups: []group{{"meta", 5, 5, 2}}},
		{name: "a member not current lowers it", in: cluster(3, metaCurrent, asset("R3", all, []string{"demo-0", "demo-1"})), ok: true, tolerates: 0,
			groups: []group{{"stream $G/R3", 3, 2, 0}, {"meta", 3, 3, 1}}},
		{name: "no meta leader (nothing answered, or no majority): none, the meta group of every server with none current", in: cluster(3, leader("")), ok: true, tolerates: 0,
			groups: []group{{"meta", 3, 0, 0}}},
		{name: "R1 streams are not replicated groups and are not listed", in: cluster(3, metaCurrent, asset("ONE", []string{"demo-2"}, []string{"demo-2"})), ok: true, tolerates: 1,
			groups: []group{{"meta", 3, 3, 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, least, ok := FaultTolerance(tc.in.Observation, names(tc.in.Servers))
			if ok != tc.ok || n != tc.tolerates {
				t.Fatalf("FaultTolerance = %d, %v; want %d, %v", n, ok, tc.tolerates, tc.ok)
			}
			var got []group
			for _, g := range least {
				got = append(got, group{g.Group, len(g.Members), len(g.Current), g.Tolerates()})
			}
			if !reflect.DeepEqual(got, tc.groups) {
				t.Errorf("groups = %v; want %v", got, tc.groups)
			}
		})
	}
	t.Run("at most five groups besides the meta group", func(t *testing.T) {
		in := cluster(3, metaCurrent)
		for i := range 8 {
			asset(fmt.Sprintf("S%d", i), r2, r2)(&in)
		}
		_, least, _ := FaultTolerance(in.Observation, names(in.Servers))
		if len(least) != MaxNamedStreams+1 || least[len(least)-1].Group != MetaGroup {
			t.Errorf("least = %+v; want %d groups, the meta group (the most tolerant) last", least, MaxNamedStreams+1)
		}
	})
}
