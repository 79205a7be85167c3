package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Scale-down. Servers beyond spec.replicas (Input.ExtraServers) are removed
// one at a time, highest ordinal first, before any other step. Each sync
// derives the phase of the server being removed from what the cluster
// shows, so a controller restarted at any point goes on where its
// predecessor was and never starts on a second server before the first is
// gone:
//
//	its pod runs and a stream or consumer group lists it ─> Evacuating: $JS.API.SERVER.EVACUATE (behind the gate)
//	its pod runs and it leads the meta group ─────────────> SteppingDown: $JS.API.META.LEADER.STEPDOWN
//	its pod runs ─────────────────────────────────────────> Stopping: its StatefulSet scaled to 0 (behind the gate)
//	stopped, the meta group lists it ─────────────────────> RemovingPeer: $JS.API.SERVER.REMOVE
//	stopped, the meta group does not list it ─────────────> Deleting: its ConfigMap, claim, then StatefulSet
//
// Held with ScaleDownBlocked, touching nothing: a stream or consumer with
// more replicas than spec.replicas leaves (nats-server could not place them
// on the remaining servers), or no system access ($SYS is needed for every
// phase but Stopping and Deleting). A stopped server that still holds
// replicas is held too: its data is on its claim, and only starting it
// again (spec.replicas back up) gets it back. Which servers the meta group
// lists is only trusted from an observation with a meta leader.

// scaleDown takes the next phase of removing the highest extra server, or
// holds; false without extra servers.
func (p *planner) scaleDown() (Decision, bool) {
	if len(p.in.ExtraServers) == 0 {
		return Decision{}, false
	}
	extra := slices.Clone(p.in.ExtraServers)
	slices.SortFunc(extra, func(a, b ServerState) int { return cmp.Compare(b.Ordinal, a.Ordinal) })
	x := extra[0]
	obs := &p.in.Observation
	n := len(p.servers)
	queue := names(extra)

	var holding []string
	for _, a := range sortedAssets(obs.Assets) {
		if slices.Contains(a.Members, x.Name) {
			holding = append(holding, assetName(a))
		}
	}
	inMeta := slices.Contains(obs.MetaMembers, x.Name)
	running := !x.Stopped || x.PodExists

	if !running {
		switch {
		case len(holding) > 0:
			return p.scaleDownBlocked(fmt.Sprintf("%s is stopped but still holds replicas of %s: set spec.replicas back to %d to start it and let the removal move them",
				x.Name, describeNames(holding), n+len(extra)), x.Name), true
		case !obs.Observed || obs.MetaLeader == "":
			return p.scaleDownWait(x.Name, queue, clusterv1beta1.RemovalRemovingPeer, "waiting for the JetStream meta group to be observed with a leader"), true
		case inMeta:
			if !p.in.CanReload {
				return p.scaleDownBlocked("removing "+x.Name+" from the JetStream meta group needs $SYS: "+p.in.NoReload, x.Name), true
			}
			return p.removalStep(x.Name, queue, clusterv1beta1.RemovalRemovingPeer, "", "removing it from the JetStream meta group"), true
		default:
			return p.removalStep(x.Name, queue, clusterv1beta1.RemovalDeleting, "", "deleting its ConfigMap, claim and StatefulSet"), true
		}
	}

	// Running: nothing is touched before these hold.
	var tooMany []string
	for _, a := range sortedAssets(obs.Assets) {
		if len(a.Members) > n {
			tooMany = append(tooMany, fmt.Sprintf("%s (%d replicas)", assetName(a), len(a.Members)))
		}
	}
	if len(tooMany) > 0 {
		return p.scaleDownBlocked(fmt.Sprintf("%s %s more replicas than the %d %s spec.replicas leaves: lower them (nats stream edit <stream> --replicas %d) or set spec.replicas back to %d",
			describeNames(tooMany), hasHave(len(tooMany)), n, plural(n, "server", "servers"), n, n+len(extra)), x.Name), true
	}
	if !p.in.CanReload {
		return p.scaleDownBlocked("removing "+x.Name+" needs $SYS to move its replicas and remove its JetStream peer: "+p.in.NoReload, x.Name), true
	}
	if obs.Observed && obs.MetaLeader == x.Name && len(holding) == 0 {
		// No gate: a leader handing over is what the gate waits for anyway.
		return p.removalStep(x.Name, queue, clusterv1beta1.RemovalSteppingDown, p.successor(), "handing JetStream meta leadership over"), true
	}
	gate := evaluateGate(p.in, p.servers)
	phase, what := clusterv1beta1.RemovalStopping, "stopping it"
	if len(holding) > 0 {
		phase, what = clusterv1beta1.RemovalEvacuating, fmt.Sprintf("moving its replicas of %s to the other servers", describeNames(holding))
	}
	if !gate.open() {
		return p.scaleDownWait(x.Name, queue, phase, what+"; waiting for "+gate.waitingFor+": "+gate.detail), true
	}
	return p.removalStep(x.Name, queue, phase, "", what), true
}

// successor is the server the leaving meta leader should hand over to: the
// lowest ordinal of the spec that is a current member.
func (p *planner) successor() string {
	for _, s := range p.servers {
		if slices.Contains(p.in.Observation.MetaCurrent, s.Name) {
			return s.Name
		}
	}
	return ""
}

func (p *planner) removalStep(server string, queue []string, phase clusterv1beta1.RemovalPhase, successor, what string) Decision {
	msg := removalMessage(server, queue, what)
	return p.decision(Decision{
		Step:        &Step{Kind: RemoveServer, Remove: &RemoveServerStep{Server: server, Phase: phase, Successor: successor}},
		Removals:    []clusterv1beta1.ServerRemoval{{Server: server, Phase: phase}},
		Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonScalingDown, msg),
	})
}

func (p *planner) scaleDownWait(server string, queue []string, phase clusterv1beta1.RemovalPhase, what string) Decision {
	msg := removalMessage(server, queue, what)
	return p.decision(Decision{
		Hold:        &Hold{Reason: clusterv1beta1.ReasonScalingDown, Message: msg},
		Removals:    []clusterv1beta1.ServerRemoval{{Server: server, Phase: phase}},
		Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonScalingDown, msg),
	})
}

func (p *planner) scaleDownBlocked(msg, server string) Decision {
	msg = "scale-down held before " + server + ": " + msg + "; no server was changed by this hold"
	return p.decision(Decision{
		Hold:        &Hold{Reason: clusterv1beta1.ReasonScaleDownBlocked, Message: msg},
		Progressing: condition(metav1.ConditionFalse, clusterv1beta1.ReasonScaleDownBlocked, msg),
	})
}

// removalMessage: "removing demo-4 (demo-4, demo-3 to remove): stopping it".
func removalMessage(server string, queue []string, what string) string {
	return fmt.Sprintf("removing %s (%s to remove): %s", server, strings.Join(queue, ", "), what)
}

// assetName is "$G/ORDERS" or "$G/ORDERS/consumer".
func assetName(a Asset) string { return a.Account + "/" + a.Name }

func sortedAssets(assets []Asset) []Asset {
	out := slices.Clone(assets)
	slices.SortFunc(out, func(a, b Asset) int { return cmp.Or(cmp.Compare(a.Account, b.Account), cmp.Compare(a.Name, b.Name)) })
	return out
}

// describeNames names up to MaxNamedStreams, then "and N more".
func describeNames(items []string) string {
	if len(items) <= MaxNamedStreams {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:MaxNamedStreams], ", "), len(items)-MaxNamedStreams)
}

func hasHave(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}
