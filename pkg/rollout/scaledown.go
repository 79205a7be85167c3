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
	// A server of the spec not created yet waits for the scale-down to end:
	// nothing is created while servers are removed (Decision.Create).
	p.create = nil
	extra := slices.Clone(p.in.ExtraServers)
	slices.SortFunc(extra, func(a, b ServerState) int { return cmp.Compare(b.Ordinal, a.Ordinal) })
	n := len(p.servers)
	return p.takeOut(takeOut{
		server: extra[0],
		stay:   n,
		doing: func(what string) string {
			return fmt.Sprintf("removing %s (%s to remove): %s", extra[0].Name, strings.Join(names(extra), ", "), what)
		},
		reason:        clusterv1beta1.ReasonScalingDown,
		blockedReason: clusterv1beta1.ReasonScaleDownBlocked,
		blockedWhat:   "scale-down",
		undo:          fmt.Sprintf("set spec.replicas back to %d", n+len(extra)),
	}), true
}

// takeOut is a server leaving the cluster: beyond spec.replicas
// (scaleDown), or to be created again empty (replace).
type takeOut struct {
	server ServerState
	// stay is how many servers remain while it is out.
	stay int
	// replace: it is a server of the spec, created again once removed. Its
	// stream and consumer groups that span every server cannot move (no
	// server is left to take them); they go on without it if the rest keep
	// a quorum, and get it back when it rejoins.
	replace bool
	// doing says what the removal does, for the Progressing message.
	doing func(what string) string
	// reason and blockedReason are the Progressing reasons while it moves
	// and when it holds; blockedWhat names the operation in a hold
	// ("scale-down"); undo is the way back a hold names.
	reason, blockedReason, blockedWhat, undo string
}

// movable says whether a group that lists the leaving server can be moved
// off it: another server that stays does not hold it yet.
func (t takeOut) movable(a Asset) bool {
	return !t.replace || len(a.Members) <= t.stay
}

// takeOut derives the phase of a server leaving the cluster and takes it,
// or holds.
func (p *planner) takeOut(t takeOut) Decision {
	x := t.server
	obs := &p.in.Observation
	var holding, stuck []string
	for _, a := range sortedAssets(obs.Assets) {
		if !slices.Contains(a.Members, x.Name) {
			continue
		}
		if t.movable(a) {
			holding = append(holding, assetName(a))
		} else {
			stuck = append(stuck, assetName(a))
		}
	}
	inMeta := slices.Contains(obs.MetaMembers, x.Name)
	running := !x.Stopped || x.PodExists
	step := func(phase clusterv1beta1.RemovalPhase, successor, what string) Decision {
		return p.removalStep(t, phase, successor, what)
	}

	if !running {
		switch {
		case len(holding) > 0:
			return p.takeOutBlocked(t, fmt.Sprintf("%s is stopped but still holds replicas of %s: %s to start it and let the %s move them",
				x.Name, describeNames(holding), t.undo, t.blockedWhat))
		case !obs.Observed || obs.MetaLeader == "":
			return p.takeOutWait(t, clusterv1beta1.RemovalRemovingPeer, "waiting for the JetStream meta group to be observed with a leader")
		case inMeta && !t.replace:
			if !p.in.CanReload {
				return p.takeOutBlocked(t, "removing "+x.Name+" from the JetStream meta group needs $SYS: "+p.in.NoReload)
			}
			return step(clusterv1beta1.RemovalRemovingPeer, "", "removing it from the JetStream meta group")
		default:
			return step(clusterv1beta1.RemovalDeleting, "", "deleting its ConfigMap, claim and StatefulSet")
		}
	}

	// Running: nothing is touched before these hold.
	var tooMany []string
	for _, a := range sortedAssets(obs.Assets) {
		switch {
		case !t.replace && len(a.Members) > t.stay:
			tooMany = append(tooMany, fmt.Sprintf("%s (%d replicas)", assetName(a), len(a.Members)))
		case t.replace && slices.Contains(stuck, assetName(a)) && len(a.Members) < 3:
			// Without the leaving server, fewer than 2 of its copies: no
			// quorum (R2), or none at all (R1 on a 1-server cluster).
			tooMany = append(tooMany, fmt.Sprintf("%s (%d replicas)", assetName(a), len(a.Members)))
		}
	}
	if t.replace && len(holding) > 0 && len(stuck) > 0 {
		// Measured (matrix/replace_matrix_test.go): $JS.API.SERVER.EVACUATE also
		// takes the server's copy of every group that spans all servers,
		// leaving it a replica short for good, even once the server is back.
		return p.takeOutBlocked(t, fmt.Sprintf("%s %s a copy on %s that must move first, but moving it ($JS.API.SERVER.EVACUATE) would also take %s's copies of %s, which %s a replica on every server, and nats-server does not give them back: raise %s to %d replicas (nats stream edit <stream> --replicas %d) so %s a copy on every server, or add a server (spec.replicas %d)",
			describeNames(holding), hasHave(len(holding)), x.Name, x.Name, describeNames(stuck), hasHave(len(stuck)),
			plural(len(holding), "it", "them"), t.stay+1, t.stay+1, plural(len(holding), "it keeps", "they keep"), t.stay+2))
	}
	if len(tooMany) > 0 {
		if t.replace {
			return p.takeOutBlocked(t, fmt.Sprintf("%s %s a replica on every server, and without %s %s no quorum: add a server (spec.replicas %d) so it can move, or remove the annotation %s",
				describeNames(tooMany), hasHave(len(tooMany)), x.Name, plural(len(tooMany), "it keeps", "they keep"), t.stay+2, clusterv1beta1.AnnotationReplaceServer))
		}
		return p.takeOutBlocked(t, fmt.Sprintf("%s %s more replicas than the %d %s spec.replicas leaves: lower them (nats stream edit <stream> --replicas %d) or %s",
			describeNames(tooMany), hasHave(len(tooMany)), t.stay, plural(t.stay, "server", "servers"), t.stay, t.undo))
	}
	if !p.in.CanReload {
		return p.takeOutBlocked(t, "removing "+x.Name+" needs $SYS to move its replicas and remove its JetStream peer: "+p.in.NoReload)
	}
	if obs.Observed && obs.MetaLeader == x.Name && len(holding) == 0 {
		// No gate: a leader handing over is what the gate waits for anyway.
		return step(clusterv1beta1.RemovalSteppingDown, p.successor(x.Name), "handing JetStream meta leadership over")
	}
	gate := evaluateGate(p.in, p.servers)
	phase, what := clusterv1beta1.RemovalStopping, "stopping it"
	if len(stuck) > 0 {
		what += fmt.Sprintf(" (%s %s a replica on every server and %s on without it)", describeNames(stuck), hasHave(len(stuck)), plural(len(stuck), "goes", "go"))
	}
	if len(holding) > 0 {
		phase, what = clusterv1beta1.RemovalEvacuating, fmt.Sprintf("moving its replicas of %s to the other servers", describeNames(holding))
	}
	if !gate.open() {
		return p.takeOutWait(t, phase, what+"; waiting for "+gate.waitingFor+": "+gate.detail)
	}
	return step(phase, "", what)
}

// successor is the server the leaving meta leader should hand over to: the
// lowest ordinal of the spec, other than the one leaving, that is a current
// member.
func (p *planner) successor(leaving string) string {
	for _, s := range p.servers {
		if s.Name != leaving && slices.Contains(p.in.Observation.MetaCurrent, s.Name) {
			return s.Name
		}
	}
	return ""
}

func (p *planner) removalStep(t takeOut, phase clusterv1beta1.RemovalPhase, successor, what string) Decision {
	msg := t.doing(what)
	return p.decision(Decision{
		Step:        &Step{Kind: RemoveServer, Remove: &RemoveServerStep{Server: t.server.Name, Phase: phase, Successor: successor, Replace: t.replace}},
		Removals:    []clusterv1beta1.ServerRemoval{{Server: t.server.Name, Phase: phase, Replace: t.replace}},
		Progressing: condition(metav1.ConditionTrue, t.reason, msg),
	})
}

func (p *planner) takeOutWait(t takeOut, phase clusterv1beta1.RemovalPhase, what string) Decision {
	msg := t.doing(what)
	return p.decision(Decision{
		Hold:        &Hold{Reason: t.reason, Message: msg},
		Removals:    []clusterv1beta1.ServerRemoval{{Server: t.server.Name, Phase: phase, Replace: t.replace}},
		Progressing: condition(metav1.ConditionTrue, t.reason, msg),
	})
}

func (p *planner) takeOutBlocked(t takeOut, msg string) Decision {
	msg = t.blockedWhat + " held before " + t.server.Name + ": " + msg + "; no server was changed by this hold"
	return p.decision(Decision{
		Hold:        &Hold{Reason: t.blockedReason, Message: msg},
		Progressing: condition(metav1.ConditionFalse, t.blockedReason, msg),
	})
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
