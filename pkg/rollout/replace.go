package rollout

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Replacing a server of the spec by an empty one: the replace-server
// annotation names it, or its claim template changed in a way its claim
// cannot take in place (ClaimTemplateDiffers). It leaves much as a
// scaled-down server does (takeOut, scaledown.go: Evacuating, SteppingDown,
// Stopping, Deleting), with two differences, both measured against
// nats-server 2.15.2 (matrix/replace_matrix_test.go):
//
//   - Its groups that span every server cannot move (no other server is
//     left to take them). They go on with the others' copies (held with
//     ReplaceBlocked when fewer than 2 would be left), and the new server
//     catches up its copy once it rejoins under the same name (within
//     seconds). Evacuating such a server anyway would take those copies
//     for good (nats-server shrinks the group and does not grow it back),
//     so a server holding both such groups and groups that must move (an
//     R1 stream) is held with ReplaceBlocked, naming both.
//   - Its JetStream peer is not removed: nats-server refuses a removed peer
//     back for 5 minutes (raft.go peerRemoveTimeout), while the same name,
//     not removed, rejoins the meta group in about 2 s and takes its place.
//
// Then:
//
//	its StatefulSet is gone ──────────────────────> Rejoining: created again (Decision.Create), with an
//	                                                  empty claim; for the annotation, first mark the
//	                                                  NatsCluster replace-server-rejoining=<server>
//	marked rejoining, created ──────────────────────> Rejoining: wait until it is a current member of
//	                                                  the meta group and the gate is open, then clear
//	                                                  both annotations
//
// The mark is what tells the new server from the old one: without it, an
// annotated server whose StatefulSet exists is the one to replace. A server
// replaced for its claim template needs no mark: the new one has the new
// template. Servers of a claim template change go one at a time, highest
// ordinal first, each behind the gate, so the next waits until the last
// rejoined.

// replace takes the next phase of a replacement, or holds; false when no
// server is to be replaced (or the one replaced has just caught up: the
// annotations are cleared along with whatever comes next).
func (p *planner) replace() (Decision, bool) {
	ann := p.in.Annotations
	name := ann[clusterv1beta1.AnnotationReplaceServer]
	if mark, ok := ann[clusterv1beta1.AnnotationReplaceRejoining]; ok && mark != name {
		// A mark left by a replacement whose annotation is gone or changed.
		p.clear = append(p.clear, clusterv1beta1.AnnotationReplaceRejoining)
	}
	if name != "" {
		return p.replaceAnnotated(name)
	}
	for i := len(p.servers) - 1; i >= 0; i-- {
		if s := p.servers[i]; s.Created && s.ClaimTemplateDiffers {
			return p.takeOut(p.replacement(s, "its claim template changed", "revert spec.jetstream.volumeClaimTemplate")), true
		}
	}
	return Decision{}, false
}

// replaceAnnotated replaces the server the replace-server annotation names.
func (p *planner) replaceAnnotated(name string) (Decision, bool) {
	i := slices.IndexFunc(p.servers, func(s ServerState) bool { return s.Name == name })
	if i < 0 {
		msg := fmt.Sprintf("the annotation %s names %q, which is not a server of this NatsCluster (%s): set it to one of them, or remove it; no server was changed",
			clusterv1beta1.AnnotationReplaceServer, name, serverRange(p.servers))
		return p.decision(Decision{
			Hold:        &Hold{Reason: clusterv1beta1.ReasonReplaceBlocked, Message: msg},
			Progressing: condition(metav1.ConditionFalse, clusterv1beta1.ReasonReplaceBlocked, msg),
		}), true
	}
	x := p.servers[i]
	rejoining := p.in.Annotations[clusterv1beta1.AnnotationReplaceRejoining] == name
	if !x.Created {
		d := Decision{}
		if !rejoining {
			d.Annotate = map[string]string{clusterv1beta1.AnnotationReplaceRejoining: name}
		}
		return p.rejoining(d, x, "creating it again with an empty claim"), true
	}
	if !rejoining {
		return p.takeOut(p.replacement(x, "", "remove the annotation "+clusterv1beta1.AnnotationReplaceServer)), true
	}
	gate := evaluateGate(p.in, p.servers)
	switch {
	case !slices.Contains(p.in.Observation.MetaCurrent, name):
		what := "waiting for it to rejoin the JetStream meta group"
		if !gate.open() {
			what += " (" + gate.waitingFor + ": " + gate.detail + ")"
		}
		return p.rejoining(Decision{}, x, what), true
	case !gate.open():
		return p.rejoining(Decision{}, x, "waiting for it to catch up: "+gate.waitingFor+": "+gate.detail), true
	}
	p.clear = append(p.clear, clusterv1beta1.AnnotationReplaceServer, clusterv1beta1.AnnotationReplaceRejoining)
	return Decision{}, false
}

// replacement is the takeOut of replacing server x; why says what asked
// for it when not the annotation, undo how to call it off.
func (p *planner) replacement(x ServerState, why, undo string) takeOut {
	prefix := "replacing " + x.Name
	if why != "" {
		prefix += " (" + why + ")"
	}
	return takeOut{
		server:        x,
		stay:          len(p.servers) - 1,
		replace:       true,
		doing:         func(what string) string { return prefix + ": " + what },
		reason:        clusterv1beta1.ReasonReplacingServer,
		blockedReason: clusterv1beta1.ReasonReplaceBlocked,
		blockedWhat:   "replacement",
		undo:          undo,
	}
}

// rejoining holds while the replaced server is created again and rejoins.
func (p *planner) rejoining(d Decision, x ServerState, what string) Decision {
	msg := "replacing " + x.Name + ": " + what
	d.Hold = &Hold{Reason: clusterv1beta1.ReasonReplacingServer, Message: msg}
	d.Removals = []clusterv1beta1.ServerRemoval{{Server: x.Name, Phase: clusterv1beta1.RemovalRejoining, Replace: true}}
	d.Progressing = condition(metav1.ConditionTrue, clusterv1beta1.ReasonReplacingServer, msg)
	return p.decision(d)
}

// serverRange is "demo-0 to demo-2", or the one server's name.
func serverRange(servers []ServerState) string {
	switch len(servers) {
	case 0:
		return "no servers"
	case 1:
		return servers[0].Name
	}
	return servers[0].Name + " to " + servers[len(servers)-1].Name
}
