package rollout

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// ephemeral puts every server's store on an emptyDir.
func ephemeral(in *Input) {
	for i := range in.Servers {
		in.Servers[i].EphemeralStore = true
	}
}

// asset adds a stream or consumer with its members and current members.
func asset(name string, members, current []string) opt {
	return func(in *Input) {
		in.Observation.Assets = append(in.Observation.Assets, Asset{Account: GlobalAccount, Name: name, Members: members, Current: current})
	}
}

var one = StreamRef{Account: GlobalAccount, Name: "ONE"}

func TestPlanHoldsBeforeARestartThatDestroysTheOnlyCurrentCopy(t *testing.T) {
	all := []string{"demo-0", "demo-1", "demo-2"}
	tests := []struct {
		name string
		in   Input
		want want
	}{
		{
			name: "an R1 stream on the next server of an ephemeral cluster holds with DataLossOnRestart naming it and the ways out",
			in:   cluster(3, ephemeral, asset("ONE", []string{"demo-2"}, []string{"demo-2"})),
			want: want{
				holdReason: clusterv1beta1.ReasonDataLossOnRestart, waitingFor: forceStepKey + "=demo-2",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonDataLossOnRestart,
				message: "restarting demo-2 would destroy the only current copy of 1 stream or consumer (ONE in the global account): " +
					"its JetStream store is not on a volume (no jetstream.volumeClaimTemplate); add a volumeClaimTemplate, raise the replicas of the streams " +
					"so that another server holds a current copy, or accept the loss with cluster.nats-operator.io/force-step=demo-2",
				anyRollout: true,
			},
		},
		{
			name: "an R1 stream on another server does not hold the step of the next server",
			in:   cluster(3, ephemeral, asset("ONE", []string{"demo-0"}, []string{"demo-0"})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "an R3 stream whose other replicas are not current holds, consumers included",
			in: cluster(3, ephemeral, asset("R3", all, []string{"demo-2"}),
				asset("R3/worker", all, []string{"demo-2"}), asset("OK", all, all)),
			want: want{
				holdReason: clusterv1beta1.ReasonDataLossOnRestart, waitingFor: forceStepKey + "=demo-2",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonDataLossOnRestart,
				contains:   []string{"2 streams and consumers (R3, R3/worker in the global account)"},
				anyRollout: true,
			},
		},
		{
			name: "an R3 stream with every replica current rolls on an ephemeral cluster",
			in:   cluster(3, ephemeral, asset("R3", all, all)),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "a cluster on volumes is never held for this",
			in:   cluster(3, asset("ONE", []string{"demo-2"}, []string{"demo-2"})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "force-step naming the server accepts the loss, and the step carries what is lost",
			in:   cluster(3, ephemeral, asset("ONE", []string{"demo-2"}, []string{"demo-2"}), annotate(forceStepKey, "demo-2")),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}, Forced: true, AcceptedLoss: []StreamRef{one}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
				clear: []string{forceStepKey},
			},
		},
		{
			name: "restart-all on an ephemeral cluster with streams holds and asks for reset-jetstream",
			in:   cluster(3, ephemeral, asset("R3", all, all), annotate(restartAllKey, "")),
			want: want{
				holdReason: clusterv1beta1.ReasonDataLossOnRestart, waitingFor: restartAllKey + "=reset-jetstream",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonDataLossOnRestart,
				contains:   []string{"restarting every server together would destroy 1 stream or consumer (R3 in the global account)", "restart-all=reset-jetstream"},
				anyRollout: true,
			},
		},
		{
			name: "restart-all=reset-jetstream on an ephemeral cluster restarts all and records the loss",
			in:   cluster(3, ephemeral, asset("R3", all, all), annotate(restartAllKey, "reset-jetstream")),
			want: want{
				step:   &Step{Kind: RestartAll, Servers: []string{"demo-2", "demo-1", "demo-0"}, AcceptedLoss: []StreamRef{{Account: GlobalAccount, Name: "R3"}}},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
				clear: []string{restartAllKey},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkDecision(t, tableCase(t, tc.in), tc.want)
		})
	}
}
