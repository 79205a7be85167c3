package rollout

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// silent: the servers have objects but do not answer; the observation
// itself went through (Observed), so only Silent says what is unknown.
func silent(names ...string) opt {
	return func(in *Input) {
		in.Observation.Silent = append(in.Observation.Silent, names...)
		for _, n := range names {
			s := server(in, n)
			s.Answered, s.PodReady, s.ReportedRevision = false, false, ""
		}
		in.Observation.Settled = Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonServersSilent, Message: "servers did not answer"}
	}
}

// hung: the server's pod runs (no start problem) but it does not answer,
// and no group counts it as current.
func hung(name string) opt {
	return func(in *Input) {
		stuck(name)(in)
		server(in, name).StartProblem = ""
		in.Observation.Silent = append(in.Observation.Silent, name)
	}
}

// Servers that do not answer are unknown, not empty: a deletion, a change
// that resets JetStream and a restart of a server without a volume never
// take "nothing listed" for "nothing there".
func TestSilentServersAreUnknownNotEmpty(t *testing.T) {
	one := StreamRef{Account: GlobalAccount, Name: "ONE"}
	tests := []struct {
		name string
		in   Input
		want want
	}{
		{
			name: "a deletion with every server silent holds: their streams are unknown",
			in:   cluster(3, deletingCluster, silent("demo-0", "demo-1", "demo-2")),
			want: want{
				holdReason: clusterv1beta1.ReasonDeleting, waitingFor: clusterv1beta1.AnnotationForceDelete,
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonDeleting,
				message: "deleting NatsCluster demo waits: cannot tell whether JetStream holds streams (demo-0, demo-1, demo-2 did not answer: streams on them are not listed); " +
					"back them up or delete them, or annotate cluster.nats-operator.io/force-delete to delete the cluster and its servers anyway (the claims are kept)",
				anyRollout: true,
			},
		},
		{
			name: "a deletion with one server silent names the streams seen and says there may be more",
			in:   cluster(3, deletingCluster, withStreams(one), silent("demo-2")),
			want: want{
				holdReason: clusterv1beta1.ReasonDeleting, waitingFor: clusterv1beta1.AnnotationForceDelete,
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonDeleting,
				contains:   []string{"JetStream holds 1 stream ($G/ONE), and maybe more (demo-2 did not answer: streams on it are not listed)"},
				anyRollout: true,
			},
		},
		{
			name: "adding auth while a server is silent needs reset-jetstream: the streams it holds are unknown",
			in:   cluster(3, addAuth, silent("demo-1"), annotate(restartAllKey, "")),
			want: want{
				holdReason: clusterv1beta1.ReasonAuthChangeBlocked, waitingFor: restartAllKey + "=reset-jetstream",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonAuthChangeBlocked,
				contains: []string{"the streams it holds are unknown (demo-1 did not answer: streams on it are not listed)",
					"(cluster.nats-operator.io/restart-all without reset-jetstream is not acted on)"},
				anyRollout: true, changes: []ChangeKind{ChangeAddAuth},
			},
		},
		{
			name: "a hung server (its pod runs, it does not answer) on an ephemeral store holds with DataLossOnRestart",
			in:   cluster(3, healthyGroups, ephemeral, hung("demo-2")),
			want: want{
				holdReason: clusterv1beta1.ReasonDataLossOnRestart, waitingFor: forceStepKey + "=demo-2",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonDataLossOnRestart,
				message: "restarting demo-2 may destroy the only current copy of streams or consumers: it does not answer, so what its JetStream store holds is unknown, " +
					"and the store is not on a volume (no jetstream.volumeClaimTemplate); find out why it does not answer (its pod runs), or accept the loss with cluster.nats-operator.io/force-step=demo-2",
				anyRollout: true,
			},
		},
		{
			name: "a hung server on an ephemeral store is restarted when force-step names it",
			in:   cluster(3, healthyGroups, ephemeral, hung("demo-2"), annotate(forceStepKey, "demo-2")),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}, Forced: true},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
				clear: []string{forceStepKey},
			},
		},
		{
			name: "a server whose container keeps crashing is down, not hung: stepped as before",
			in:   cluster(3, healthyGroups, ephemeral, stuck("demo-2"), silent("demo-2")),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}, Down: true},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "a hung server on a volume is stepped as down: its store survives the restart",
			in:   cluster(3, healthyGroups, hung("demo-2")),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}, Down: true},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "restart-all on an ephemeral store with a hung server holds for reset-jetstream",
			in:   cluster(3, healthyGroups, ephemeral, hung("demo-1"), annotate(restartAllKey, "")),
			want: want{
				holdReason: clusterv1beta1.ReasonDataLossOnRestart, waitingFor: restartAllKey + "=reset-jetstream",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonDataLossOnRestart,
				contains:   []string{"restarting every server together would destroy 1 stream or consumer (ORDERS in the global account), and what the stores of demo-1 hold (unknown: they do not answer)"},
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
