package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// A Raft group (the JetStream meta group, each stream and consumer of more
// than one replica) takes writes while a majority of its members is
// current. Restarting a member leaves the others: when they are fewer than
// a majority, the group stops for as long as the server is down (the meta
// group: no stream or consumer can be created, changed or deleted; a
// stream: no message is stored). A 2-server JetStream cluster and every R2
// stream are such groups at every step. The planner never takes such a
// restart by itself: it holds with QuorumLossOnRestart, naming up to
// MaxNamedStreams groups, until force-step names the server (this step) or
// spec.rollout.acceptQuorumLoss is set (every step). A server that is down
// already, a reload (no restart) and restart-all (an outage asked for) do
// not lower what is current, and do not hold. R1 streams have no majority
// to lose: they stop while their server restarts, which is what R1 means.

// MetaGroup is the name the JetStream meta group has in fault-tolerance
// figures.
const MetaGroup = "meta"

// GroupTolerance is one Raft group's fault tolerance now.
type GroupTolerance struct {
	// Group is "meta", "stream <account>/<name>" or "consumer
	// <account>/<stream>/<consumer>".
	Group string
	// Members are the servers holding a replica; Current those current.
	Members, Current []string
}

// Quorum is the majority of the group's members.
func (g GroupTolerance) Quorum() int { return len(g.Members)/2 + 1 }

// Tolerates is how many current members may stop with a majority left;
// never below 0.
func (g GroupTolerance) Tolerates() int { return max(0, len(g.Current)-g.Quorum()) }

// lostBy says whether stopping server leaves the group, which has a
// majority now, without one.
func (g GroupTolerance) lostBy(server string) bool {
	if !slices.Contains(g.Members, server) || len(g.Current) < g.Quorum() {
		return false
	}
	left := 0
	for _, m := range g.Current {
		if m != server {
			left++
		}
	}
	return left < g.Quorum()
}

// replicatedGroups are the observation's groups of more than one member:
// the meta group first, then streams and consumers by account and name.
func replicatedGroups(obs Observation) []GroupTolerance {
	var out []GroupTolerance
	if len(obs.MetaMembers) > 1 {
		out = append(out, GroupTolerance{Group: MetaGroup, Members: obs.MetaMembers, Current: obs.MetaCurrent})
	}
	assets := slices.Clone(obs.Assets)
	slices.SortFunc(assets, func(a, b Asset) int { return cmp.Or(cmp.Compare(a.Account, b.Account), cmp.Compare(a.Name, b.Name)) })
	for _, a := range assets {
		if len(a.Members) < 2 {
			continue
		}
		kind := "stream "
		if strings.Contains(a.Name, "/") {
			kind = "consumer "
		}
		out = append(out, GroupTolerance{Group: kind + a.Account + "/" + a.Name, Members: a.Members, Current: a.Current})
	}
	return out
}

// FaultTolerance is how many servers a JetStream cluster of the named
// servers can lose now with every replicated group keeping a majority of
// current members, and its least tolerant groups (at most
// MaxNamedStreams+1, lowest first, the meta group always among them).
// Nothing is known without an observation (ok false). Without a meta leader
// (no server answered, or no majority) it is 0, the meta group of every
// server with none current; with no replicated group, all but one server.
func FaultTolerance(obs Observation, servers []string) (tolerates int, least []GroupTolerance, ok bool) {
	if !obs.Observed {
		return 0, nil, false
	}
	if obs.MetaLeader == "" {
		return 0, []GroupTolerance{{Group: MetaGroup, Members: servers}}, true
	}
	groups := replicatedGroups(obs)
	tolerates = max(0, len(servers)-1)
	for _, g := range groups {
		tolerates = min(tolerates, g.Tolerates())
	}
	var meta *GroupTolerance
	var rest []GroupTolerance
	for i, g := range groups {
		if g.Group == MetaGroup {
			meta = &groups[i]
		} else {
			rest = append(rest, g)
		}
	}
	slices.SortStableFunc(rest, func(a, b GroupTolerance) int { return cmp.Compare(a.Tolerates(), b.Tolerates()) })
	if len(rest) > MaxNamedStreams {
		rest = rest[:MaxNamedStreams]
	}
	if meta != nil {
		least = append(least, *meta)
	}
	least = append(least, rest...)
	slices.SortStableFunc(least, func(a, b GroupTolerance) int { return cmp.Compare(a.Tolerates(), b.Tolerates()) })
	return tolerates, least, true
}

// quorumLoss are the groups restarting s would leave without a majority
// (none when it is not a current member of one: a server down already).
func (p *planner) quorumLoss(s ServerState) []GroupTolerance {
	var out []GroupTolerance
	for _, g := range replicatedGroups(p.in.Observation) {
		if g.lostBy(s.Name) {
			out = append(out, g)
		}
	}
	return out
}

// quorumHold holds before restarting target, which would leave lost
// without a majority.
func (p *planner) quorumHold(target ServerState, lost []GroupTolerance) Decision {
	gate := evaluateGate(p.in, p.servers)
	msg := quorumLossMessage(target.Name, lost)
	return p.decision(Decision{
		Hold:        &Hold{Reason: clusterv1beta1.ReasonQuorumLossOnRestart, Message: msg, WaitingFor: clusterv1beta1.AnnotationForceStep + "=" + target.Name},
		Rollout:     p.rolloutStatus(p.current(gate), gate),
		Progressing: condition(metav1.ConditionFalse, clusterv1beta1.ReasonQuorumLossOnRestart, msg),
	})
}

// quorumLossMessage: "restarting demo-1 would stop the writes of 2 Raft
// groups until it is back: the JetStream meta group has 2 members, both
// needed for a majority (no stream or consumer can be created, changed or
// deleted); stream $G/ORDERS is R2: restarting demo-1 stops its writes;
// raise the replicas (3 servers, R3 streams) so that a majority survives
// one restart, accept it for this step with
// cluster.nats-operator.io/force-step=demo-1, or for every step with
// spec.rollout.acceptQuorumLoss: true".
func quorumLossMessage(server string, lost []GroupTolerance) string {
	shown := lost
	if len(shown) > MaxNamedStreams {
		shown = shown[:MaxNamedStreams]
	}
	parts := make([]string, 0, len(shown)+1)
	for _, g := range shown {
		if g.Group == MetaGroup {
			parts = append(parts, fmt.Sprintf("the JetStream meta group has %d members, %d current, %d needed for a majority (no stream or consumer can be created, changed or deleted)",
				len(g.Members), len(g.Current), g.Quorum()))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s is R%d: restarting %s stops its writes", g.Group, len(g.Members), server))
	}
	if more := len(lost) - len(shown); more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	return fmt.Sprintf("restarting %s would stop the writes of %d Raft %s until it is back: %s; "+
		"raise the replicas (3 servers, R3 streams) so that a majority survives one restart, accept it for this step with %s=%s, or for every step with spec.rollout.acceptQuorumLoss: true",
		server, len(lost), plural(len(lost), "group", "groups"), strings.Join(parts, "; "), clusterv1beta1.AnnotationForceStep, server)
}

// groupNames are the groups' names; nil for none.
func groupNames(groups []GroupTolerance) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g.Group)
	}
	return out
}
