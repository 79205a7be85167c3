package rollout

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// A server whose JetStream store is not on a PersistentVolumeClaim (an
// emptyDir) starts empty after every restart. Restarting it destroys every
// stream and consumer whose only current copy it holds: an R1 asset placed
// on it, or one whose other replicas are not current. The planner never
// takes such a step by itself: it holds with DataLossOnRestart, naming the
// assets and the ways out; force-step naming the server accepts the loss
// (the step carries the assets, and the controller's Event records them).

// soleCopies are the assets whose only current copy is on server: server is
// a member and no other member is current. Sorted by account and name.
func soleCopies(assets []Asset, server string) []StreamRef {
	var out []StreamRef
	for _, a := range assets {
		if !slices.Contains(a.Members, server) {
			continue
		}
		elsewhere := slices.ContainsFunc(a.Current, func(m string) bool { return m != server })
		if !elsewhere {
			out = append(out, StreamRef{Account: a.Account, Name: a.Name})
		}
	}
	return sortedStreams(out)
}

// lossOnRestart is what restarting s would destroy: nothing unless its store
// is ephemeral and it runs JetStream.
func (p *planner) lossOnRestart(s ServerState) []StreamRef {
	if !s.EphemeralStore || !s.Running.JetStream {
		return nil
	}
	return soleCopies(p.in.Observation.Assets, s.Name)
}

// hungOnEphemeral says s runs JetStream on an ephemeral store and its pod
// exists with its container not failing, yet it does not answer: what its
// store holds is unknown, and a restart empties it. (A server whose
// container cannot start or keeps crashing has a StartProblem, and is
// stepped by a version revert as before.)
func (p *planner) hungOnEphemeral(s ServerState) bool {
	return s.Created && s.EphemeralStore && s.Running.JetStream && s.PodExists && !s.Answered && s.StartProblem == ""
}

// dataLossHold holds before restarting target, which would destroy lost.
func (p *planner) dataLossHold(target ServerState, lost []StreamRef) Decision {
	gate := evaluateGate(p.in, p.servers)
	msg := dataLossMessage(target.Name, lost)
	if len(lost) == 0 {
		msg = unknownLossMessage(target.Name)
	}
	return p.decision(Decision{
		Hold:        &Hold{Reason: clusterv1beta1.ReasonDataLossOnRestart, Message: msg, WaitingFor: clusterv1beta1.AnnotationForceStep + "=" + target.Name},
		Rollout:     p.rolloutStatus(p.current(gate), gate),
		Progressing: condition(metav1.ConditionFalse, clusterv1beta1.ReasonDataLossOnRestart, msg),
	})
}

// restartAllLoss is what restarting every server together destroys: with any
// ephemeral JetStream store, every asset with no current copy on a server
// that keeps its store.
func (p *planner) restartAllLoss() []StreamRef {
	kept := map[string]bool{}
	ephemeral := false
	for _, s := range p.servers {
		if s.EphemeralStore && s.Running.JetStream {
			ephemeral = true
		} else {
			kept[s.Name] = true
		}
	}
	if !ephemeral {
		return nil
	}
	var out []StreamRef
	for _, a := range p.in.Observation.Assets {
		if !slices.ContainsFunc(a.Current, func(m string) bool { return kept[m] }) {
			out = append(out, StreamRef{Account: a.Account, Name: a.Name})
		}
	}
	return sortedStreams(out)
}

// dataLossMessage: "restarting demo-0 would destroy the only current copy of
// 1 stream or consumer (ONE in the global account): its store is not on a
// volume (no jetstream.volumeClaimTemplate); add a volumeClaimTemplate, raise
// the stream's replicas so another server holds a current copy, or accept
// the loss with cluster.nats-operator.io/force-step=demo-0".
func dataLossMessage(server string, lost []StreamRef) string {
	return fmt.Sprintf("restarting %s would destroy the only current copy of %s: its JetStream store is not on a volume (no jetstream.volumeClaimTemplate); "+
		"add a volumeClaimTemplate, raise the replicas of the streams so that another server holds a current copy, or accept the loss with %s=%s",
		server, CountAssets(lost), clusterv1beta1.AnnotationForceStep, server)
}

// unknownLossMessage is the hold before restarting a hung server whose
// store is not on a volume.
func unknownLossMessage(server string) string {
	return fmt.Sprintf("restarting %s may destroy the only current copy of streams or consumers: it does not answer, so what its JetStream store holds is unknown, "+
		"and the store is not on a volume (no jetstream.volumeClaimTemplate); find out why it does not answer (its pod runs), or accept the loss with %s=%s",
		server, clusterv1beta1.AnnotationForceStep, server)
}

// restartAllLossMessage is the hold of restart-all on an ephemeral store;
// hung are servers that do not answer, whose stores hold what is unknown.
func restartAllLossMessage(lost []StreamRef, hung []string) string {
	what := CountAssets(lost)
	switch {
	case len(lost) == 0:
		what = "what the stores of " + strings.Join(hung, ", ") + " hold (unknown: they do not answer)"
	case len(hung) > 0:
		what += ", and what the stores of " + strings.Join(hung, ", ") + " hold (unknown: they do not answer)"
	}
	return fmt.Sprintf("restarting every server together would destroy %s: the JetStream store is not on a volume (no jetstream.volumeClaimTemplate); "+
		"add a volumeClaimTemplate first, or accept the loss with %s=%s",
		what, clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllResetJetStream)
}

// hungServers are the servers hungOnEphemeral.
func (p *planner) hungServers() []string {
	var out []string
	for _, s := range p.servers {
		if p.hungOnEphemeral(s) {
			out = append(out, s.Name)
		}
	}
	return out
}

// CountAssets says how many streams and consumers there are and names them:
// "1 stream or consumer (ONE in the global account)".
func CountAssets(assets []StreamRef) string {
	return fmt.Sprintf("%d %s (%s)", len(assets), plural(len(assets), "stream or consumer", "streams and consumers"), describeStreams(assets))
}
