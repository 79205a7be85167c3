package rollout

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// ownMetaGroup holds the gateway added to or removed from a cluster that
// runs JetStream (on a server to step or in the target), whatever the
// annotations say: restarting every server together does not help.
//
// Joining, the cluster's servers keep the meta group on their volumes and
// the supercluster has its own; nats-server puts all of them under the
// supercluster's meta leader, whose meta group does not know the joining
// cluster's streams: they keep running on their own Raft groups but
// JetStream no longer lists or manages them, through a later rolling
// restart too (matrix TestJoiningWithAMetaGroupOfItsOwn, nats-server
// 2.15.2: "the meta group lists [WEST_ORDERS]", east's ORDERS missing).
// Leaving, the meta group spans every cluster of the supercluster: the
// servers that leave are its peers, and neither side keeps a meta group
// it can trust.
func (p *planner) ownMetaGroup(streams []StreamRef) (Decision, bool) {
	var gw *Change
	for i, c := range p.changes {
		if c.Kind == ChangeGateway {
			gw = &p.changes[i]
		}
	}
	if gw == nil || !(p.runsJetStream() || p.in.Target.JetStream) {
		return Decision{}, false
	}
	joining := p.in.Target.Gateway
	msg := ownMetaGroupMessage(p.in.Cluster, joining, p.gatewayRemoteNames(), p.in.Observation.MetaLeader, streams, p.in.Observation.streamsKnown())
	return p.heldOwnMetaGroup(msg, "spec.gateway"), true
}

// heldOwnMetaGroup is the OwnMetaGroup hold with msg, waiting for the
// field named: no step, every server pending.
func (p *planner) heldOwnMetaGroup(msg, waitingFor string) Decision {
	reason := clusterv1beta1.ReasonOwnMetaGroup
	return p.decision(Decision{
		Hold: &Hold{Reason: reason, Message: msg, WaitingFor: waitingFor},
		Rollout: &clusterv1beta1.RolloutStatus{
			TargetRevision: p.in.TargetRevision,
			Pending:        p.allServersTogether(),
		},
		Progressing: condition(metav1.ConditionFalse, reason, msg),
	})
}

// joiningMetaGroups holds a new gateway remote that would join two
// JetStream meta groups: the cluster runs JetStream, the remote runs (or
// may run) a meta group of its own (Input.JetStreamRemotes), and no
// server has a gateway to it yet (Observation.Gateways), so the two are
// not one supercluster today. Rolled one server at a time, the gateway
// matrix finds the merged meta group does not list one side's streams
// (the case "a remote joining two meta groups"). A remote some server
// already reaches (through another member) joins nothing new.
func (p *planner) joiningMetaGroups() (Decision, bool) {
	if !slices.ContainsFunc(p.changes, func(c Change) bool { return c.Kind == ChangeGatewayRemotes }) ||
		!p.in.Target.Gateway || !(p.runsJetStream() || p.in.Target.JetStream) || !p.in.Observation.Observed {
		return Decision{}, false
	}
	running := map[string]bool{}
	for _, s := range p.need {
		if s.Running.Gateway {
			for _, n := range remoteNames(s.Running.GatewayRemotes) {
				running[n] = true
			}
		}
	}
	var joining []string
	for _, n := range remoteNames(p.in.Target.GatewayRemotes) {
		if !running[n] && slices.Contains(p.in.JetStreamRemotes, n) && !slices.Contains(p.in.Observation.Gateways, n) {
			joining = append(joining, n)
		}
	}
	if len(joining) == 0 {
		return Decision{}, false
	}
	streams := sortedStreams(p.in.Observation.Streams)
	held := ""
	switch {
	case !p.in.Observation.streamsKnown():
		held = "; the streams it holds are unknown"
	case len(streams) > 0:
		held = fmt.Sprintf("; it holds %d %s (%s)", len(streams), plural(len(streams), "stream", "streams"), describeStreams(streams))
	}
	own := "a JetStream meta group of its own"
	if l := p.in.Observation.MetaLeader; l != "" {
		own += " (leader " + l + ")"
	}
	msg := fmt.Sprintf("adding the gateway remote %s cannot be done on a running cluster with JetStream: %s runs %s%s, no server reaches %s yet, and %s runs (or may run) another; "+
		"nats-server would put every server under one meta leader whose meta group does not list the other group's streams (they run on, unmanaged), "+
		"so no restart makes it safe. Remove the remote to go back; to join, back up the streams of one side, delete its NatsCluster and volumes, and create it again with the remote: "+
		"a new cluster joins with no meta group of its own",
		strings.Join(joining, ", "), p.in.Cluster, own, held, strings.Join(joining, ", "), strings.Join(joining, ", "))
	return p.heldOwnMetaGroup(msg, "spec.gateway.remotes"), true
}

// remoteNames are the remote clusters' names of a GatewayRemotes fact.
func remoteNames(remotes string) []string {
	var names []string
	for _, part := range strings.Split(remotes, "; ") {
		if name, _, ok := strings.Cut(part, "="); ok && name != "advertise" {
			names = append(names, name)
		}
	}
	return names
}

// gatewayRemoteNames are the remote clusters' names of the gateway
// joined (the target's) or left (a running server's).
func (p *planner) gatewayRemoteNames() []string {
	remotes := p.in.Target.GatewayRemotes
	if !p.in.Target.Gateway {
		for _, s := range p.need {
			if s.Running.Gateway {
				remotes = s.Running.GatewayRemotes
				break
			}
		}
	}
	return remoteNames(remotes)
}

func ownMetaGroupMessage(cluster string, joining bool, remotes []string, leader string, streams []StreamRef, streamsKnown bool) string {
	var b strings.Builder
	own := "a JetStream meta group of its own"
	if leader != "" {
		own += " (leader " + leader + ")"
	}
	other := "the supercluster"
	if len(remotes) > 0 {
		other += " of " + strings.Join(remotes, ", ")
	}
	held := ""
	switch {
	case !streamsKnown:
		held = "; the streams it holds are unknown"
	case len(streams) > 0:
		held = fmt.Sprintf("; it holds %d %s (%s)", len(streams), plural(len(streams), "stream", "streams"), describeStreams(streams))
	}
	if joining {
		fmt.Fprintf(&b, "adding the gateway cannot be done on a running cluster with JetStream: %s runs %s%s, and %s has another; "+
			"nats-server puts every server under one meta leader whose meta group does not list the other group's streams (they run on, unmanaged), "+
			"so no restart (one at a time or all together) makes it safe. "+
			"Remove spec.gateway to go back; to join, back up the streams, delete the NatsCluster and its volumes, and create it again with spec.gateway: "+
			"a new cluster joins with no meta group of its own", cluster, own, held, other)
		return b.String()
	}
	fmt.Fprintf(&b, "removing the gateway cannot be done on a running cluster with JetStream: %s's servers are peers of the JetStream meta group of %s%s, "+
		"and leaving would take them out of it without removing them, so neither side keeps a meta group it can trust. "+
		"Put spec.gateway back; to leave, move the streams off %s, delete the NatsCluster and its volumes, and create it again without spec.gateway", cluster, other, held, cluster)
	return b.String()
}
