package rollout

// The planner's states. Every sync starts at the top with what the cluster
// shows (each server's ConfigMap, template and restart revisions, pods, what
// each server reports, the observed Snapshot) and status.rollout as last
// written; nothing else is remembered between syncs.
//
//	Deleting (deletionTimestamp set) ───────────────────> ReleaseFinalizer when force-delete is set or JetStream
//	                                                       is observed holding no streams, else Hold Deleting
//	                                                       (False); never a step or a server created (deletion.go)
//	Blocked (reference, trust, spec, object in the way) ─> Hold with its reason (False; nothing created or touched)
//	servers beyond spec.replicas ──────────────────────> one phase of removing the highest (scaledown.go):
//	                                                       RemoveServer step, or Hold ScalingDown / ScaleDownBlocked
//	replace-server, or a claim template to replace ────> one phase of replacing the server (replace.go):
//	                                                       RemoveServer step, create it again, wait until it
//	                                                       rejoined; Hold ReplacingServer / ReplaceBlocked
//	a claim to grow (class allows expansion) ──────────> ExpandClaim step, or Hold ExpandingStorage (claims.go)
//	   │ otherwise: servers not created yet go in Decision.Create (any state below)
//	   ▼
//	                     +-------------------------------+
//	                     | which servers need a step?    |
//	                     | (objects not at the target)   |
//	                     +-------------------------------+
//	                      none |                 | some
//	         +-----------------+                 v
//	         v                       +-----------------------+   yes   +----------------------------+
//	 +----------------+              | split, or JetStream   |-------->| restart-all (=reset-       |
//	 | converged to   |              | reset with streams?   |         | jetstream when streams     |
//	 | the target?    |              +-----------------------+         | would be left behind)?     |
//	 +----------------+                    no |                        +----------------------------+
//	  |yes   |never   |no                     v                           yes |            | no
//	  v      v        v               +---------------+                     v            v
//	UpToDate Creating waiting         | restart-all?  |--yes--> Step RestartAll     Hold AuthChangeBlocked
//	(False)  (True)   for the gate    +---------------+         (all servers,      or UnsupportedChange
//	                  after the last       no |                  together)          (False; pending lists
//	                  step (True           v                                        every server; no step)
//	                  RollingRestart  +---------------+
//	                  or GateBlocked; | force-step    |--yes--> Step RestartOne (forced)
//	                  UpToDate once   | names a       |
//	                  the gate opens  | pending one?  |
//	                  and every       +---------------+
//	                  server reports       no |
//	                  the target)             v
//	                                  +---------------+
//	                                  | paused?       |--yes--> Hold RolloutPaused (True)
//	                                  +---------------+
//	                                       no |
//	                                          v
//	                                  +---------------+  closed
//	                                  | gate: Observed,|-------> Hold RollingRestart (True), after
//	                                  | Settled, Meta- |         GateBlockedAfter GateBlocked; waitingFor
//	                                  | Membership,    |         the first closed check, since carried
//	                                  | PodsReady,     |         over while it stays the same check;
//	                                  | TargetRevision |         current stays put
//	                                  +---------------+
//	                                     open |
//	                                          v
//	                                  Step RestartOne: the next pending server, highest
//	                                  ordinal first, the JetStream meta leader last (True
//	                                  RollingRestart; it becomes current)
//
// Paths the diagram leaves implicit:
//   - created but never converged (ConvergedRevision ""): Creating (True)
//     until the gate opens with every server on the target, then UpToDate;
//   - servers added by a scale-up (created for the target revision, or not
//     created yet) while no running server needs a step and none was stepped
//     toward the target: ScalingUp (True) until the gate opens with every
//     server on its target, GateBlocked after GateBlockedAfter; each server
//     is compared with its own target revision (TargetConfigRevision), so the
//     running servers need no step;
//   - streams unknown (the observation failed) are treated as present: a
//     change that resets JetStream needs restart-all=reset-jetstream;
//   - a restart that would destroy the only current copy of a stream (no
//     volume) holds with DataLossOnRestart (dataloss.go), one that would
//     leave a Raft group without a majority of current members with
//     QuorumLossOnRestart (quorum.go); a down server is
//     stepped through a closed gate when the rest is settled (stuck.go);
//   - restart-all or force-step with nothing left to act on are cleared
//     (ClearAnnotations) on the way to UpToDate or the gate.
//
// No timeout ever opens the gate. Only the annotations, which the controller
// clears once acted on (ClearAnnotations), push a step past it.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Plan decides the next step of a NatsCluster's rollout, or why there is none.
// It is pure: the same Input always gives the same Decision.
func Plan(in Input) Decision {
	d := plan(in)
	d.KeepsTurn = !yieldsTurn(&in, &d)
	return d
}

// yieldsTurn: the rollout is not taking steps of its own for now (done,
// held, paused, deleting, its gate closed for GateBlockedAfter, a server
// that cannot start, or a migration waiting on its Job), so a member of a
// supercluster gives up its turn and the others go on; the gates over the
// shared meta group still keep two of its servers from being down at once.
func yieldsTurn(in *Input, d *Decision) bool {
	if d.Progressing.Status != metav1.ConditionTrue {
		return true
	}
	switch d.Progressing.Reason {
	case clusterv1beta1.ReasonGateBlocked, clusterv1beta1.ReasonRolloutPaused, clusterv1beta1.ReasonDeleting,
		clusterv1beta1.ReasonMigratingJetStream, clusterv1beta1.ReasonMigrationBlocked:
		return true
	}
	for _, s := range append(slices.Clone(in.Servers), in.ExtraServers...) {
		if s.StartProblem != "" {
			return true
		}
	}
	return false
}

func plan(in Input) Decision {
	// Deleting comes first: a cluster whose spec cannot render must still
	// be deletable.
	if in.Deleting {
		return deleting(&in)
	}
	if in.Blocked != nil {
		return blocked(in.Blocked)
	}
	p := newPlanner(&in)
	if d, ok := p.scaleDown(); ok {
		return d
	}
	if d, ok := p.replace(); ok {
		return d
	}
	if d, ok := p.expandClaims(); ok {
		return d
	}
	if len(p.need) == 0 {
		return p.noStepNeeded()
	}
	if d, ok := p.joiningMetaGroups(); ok {
		return d
	}
	if d, ok := p.heldTransition(); ok {
		return d
	}
	if d, ok := p.restartAll(); ok {
		return d
	}
	if d, ok := p.forceStep(); ok {
		return d
	}
	if d, ok := p.continueReload(); ok {
		return d
	}
	return p.rollOne()
}

// planner holds what every state derives from the Input.
type planner struct {
	in *Input
	// servers sorted by ordinal (then name), duplicates dropped.
	servers []ServerState
	// need are the servers whose template is not the target, in step order.
	need []ServerState
	// stepped are the servers whose template is the target, highest ordinal first.
	stepped []ServerState
	// changes between the running configs of need and the target.
	changes []Change
	// total and done count the servers of this rollout and those already
	// stepped, for "(k of n)". After a revert to the converged revision, the
	// servers that never left it are not part of the rollout.
	total, done int
	// clear collects one-shot annotations to remove.
	clear []string
	// create are the servers not created yet, in ordinal order.
	create []string
	// claimWaits are servers to create whose old claim is still being
	// deleted: created once it is gone.
	claimWaits []string
}

func newPlanner(in *Input) *planner {
	p := &planner{in: in, servers: make([]ServerState, 0, len(in.Servers))}
	seen := make(map[string]bool, len(in.Servers))
	sorted := slices.Clone(in.Servers)
	slices.SortStableFunc(sorted, func(a, b ServerState) int {
		return cmp.Or(cmp.Compare(a.Ordinal, b.Ordinal), cmp.Compare(a.Name, b.Name))
	})
	for _, s := range sorted {
		if seen[s.Name] {
			continue
		}
		seen[s.Name] = true
		p.servers = append(p.servers, s)
	}
	lists := make([][]Change, 0, len(p.servers))
	for _, s := range p.servers {
		switch {
		case !s.Created && s.OldClaimDeleting:
			// Its old claim is still going: created once it is gone.
			p.claimWaits = append(p.claimWaits, s.Name)
		case !s.Created:
			// Not created yet: the controller creates it at the target.
			p.create = append(p.create, s.Name)
		case in.atTarget(s):
			p.stepped = append(p.stepped, s)
		default:
			p.need = append(p.need, s)
			lists = append(lists, Classify(s.Running, in.Target))
		}
	}
	p.need = stepOrder(p.need, p.metaLeader())
	slices.Reverse(p.stepped)
	p.changes = mergeChanges(lists...)
	p.total, p.done = len(p.servers), len(p.stepped)
	if in.TargetRevision == in.ConvergedRevision {
		prev := in.Previous
		for _, s := range p.stepped {
			touched := prev != nil && prev.TargetRevision == in.TargetRevision &&
				(prev.Current == s.Name || slices.Contains(prev.Updated, s.Name))
			if !touched {
				p.total--
				p.done--
			}
		}
	}
	return p
}

// metaLeader is the observed JetStream meta leader, if any.
func (p *planner) metaLeader() string {
	if !p.in.Observation.Observed {
		return ""
	}
	return p.in.Observation.MetaLeader
}

// stepOrder orders servers highest ordinal first, the meta leader last.
func stepOrder(servers []ServerState, leader string) []ServerState {
	out := slices.Clone(servers)
	slices.SortStableFunc(out, func(a, b ServerState) int {
		al, bl := a.Name == leader && leader != "", b.Name == leader && leader != ""
		if al != bl {
			if al {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(b.Ordinal, a.Ordinal), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// allServersTogether is every server, highest ordinal first: the servers a
// held transition or restart-all names. They restart together, so the meta
// leader has no reason to go last, and the list does not change when
// leadership moves while the transition is held.
func (p *planner) allServersTogether() []string {
	return names(stepOrder(p.servers, ""))
}

// annotation returns a one-shot annotation and whether it is set.
func (p *planner) annotation(key string) (string, bool) {
	v, ok := p.in.Annotations[key]
	return strings.TrimSpace(v), ok
}

// noStepNeeded: every existing server's template is the target. The cluster is
// up to date, being created, or waiting for the gate after the last step.
func (p *planner) noStepNeeded() Decision {
	for _, key := range []string{clusterv1beta1.AnnotationForceStep, clusterv1beta1.AnnotationRestartAll} {
		if _, ok := p.annotation(key); ok {
			p.clear = append(p.clear, key) // nothing left to act on
		}
	}
	in := p.in
	// Converged and no step taken toward this revision since: up to date (a
	// pod that restarts by itself does not start a rollout). After a revert
	// to the converged revision that stepped a server, wait for the gate as
	// after any step.
	stepping := in.Previous != nil && in.Previous.TargetRevision == in.TargetRevision && in.Previous.Current != ""
	if in.ConvergedRevision == in.TargetRevision && in.TargetRevision != "" && !stepping {
		return p.upToDate()
	}
	gate := evaluateGate(in, p.servers)
	if d, ok := p.migrationRestore(gate); ok {
		return d
	}
	if gate.open() && p.everyServerOnTarget() {
		return p.upToDate()
	}
	if in.ConvergedRevision == "" {
		return p.decision(Decision{
			Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonCreating, joinNonEmpty(creatingMessage(in, len(p.servers), gate), p.startProblems())),
		})
	}
	if added := p.added(); len(added) > 0 && !stepping {
		return p.scaleUp(gate, added)
	}
	return p.waitForGate(gate, "")
}

// added are the servers this rollout adds: created for the target revision,
// or to be created now.
func (p *planner) added() []string {
	var out []string
	for _, s := range p.servers {
		if !s.Created || (s.CreatedFor != "" && s.CreatedFor == p.in.TargetRevision) {
			out = append(out, s.Name)
		}
	}
	return out
}

// scaleUp waits for the servers a scale-up adds, when no running server
// needs a step: ScalingUp until the gate opens with every server on its
// target, GateBlocked once it stays closed for GateBlockedAfter.
func (p *planner) scaleUp(gate gateResult, added []string) Decision {
	st := p.rolloutStatus("", gate)
	st.Updated = nil
	return p.wait(st, gate, clusterv1beta1.ReasonScalingUp, func(waitingFor string, blocked bool, waited time.Duration, detail string) string {
		return scaleUpMessage(added, len(p.servers), waitingFor, blocked, waited, detail)
	})
}

// everyServerOnTarget: every server exists at the target and reports it.
func (p *planner) everyServerOnTarget() bool {
	for _, s := range p.servers {
		if !p.in.atTarget(s) || !s.PodReady || !p.in.reportsTarget(s) {
			return false
		}
	}
	return true
}

func (p *planner) upToDate() Decision {
	by, why := p.applied()
	msg := upToDateMessage(p.in, len(p.servers))
	if m := p.in.Migration; m != nil && m.Restore.Phase == clusterv1beta1.BackupSucceeded {
		_, into := p.migrationDirection()
		msg += fmt.Sprintf("; JetStream migrated: %d streams (%s) restored into %s by NatsRestore %s",
			len(m.Restore.Streams), strings.Join(m.Restore.Streams, ", "), into, m.Restore.Name)
	}
	return p.decision(Decision{
		Progressing:   condition(metav1.ConditionFalse, clusterv1beta1.ReasonUpToDate, msg),
		AppliedBy:     by,
		RestartReason: why,
	})
}

// heldTransition holds a change that cannot roll one server at a time (a
// split), or one that would leave streams behind, unless restart-all (with
// reset-jetstream when streams would be left behind) releases it.
func (p *planner) heldTransition() (Decision, bool) {
	split := false
	for _, c := range p.changes {
		split = split || effects[c.Kind].Splits
	}
	reset := p.resetsJetStream()
	streamsKnown := p.in.Observation.streamsKnown()
	leavesStreams := reset && (!streamsKnown || len(p.in.Observation.Streams) > 0)
	if !split && !leavesStreams {
		return Decision{}, false
	}
	streams := sortedStreams(p.in.Observation.Streams)
	if d, ok := p.ownMetaGroup(streams); ok {
		return d, true
	}
	value, restartAll := p.annotation(clusterv1beta1.AnnotationRestartAll)
	if restartAll && leavesStreams && value == clusterv1beta1.RestartAllMigrateJetStream && streamsKnown {
		return p.migrate(reset, streams), true
	}
	if restartAll && (!leavesStreams || value == clusterv1beta1.RestartAllResetJetStream) {
		return p.restartAllStep(reset, streams), true
	}
	reason := clusterv1beta1.ReasonUnsupportedChange
	for _, c := range p.changes {
		if r := effects[c.Kind].HoldReason; r != "" && effects[c.Kind].Splits {
			reason = r
			break
		}
	}
	waitingFor := clusterv1beta1.AnnotationRestartAll
	if leavesStreams {
		waitingFor += "=" + clusterv1beta1.RestartAllResetJetStream
	}
	listed := streams
	if !p.in.Observation.Observed {
		listed = nil
	}
	msg := heldMessage(p.changes, split, p.allServersTogether(), leavesStreams, p.in.Observation.unknownWhy(), listed, restartAll)
	return p.decision(Decision{
		Hold: &Hold{Reason: reason, Message: msg, WaitingFor: waitingFor},
		Rollout: &clusterv1beta1.RolloutStatus{
			TargetRevision: p.in.TargetRevision,
			Pending:        p.allServersTogether(),
		},
		Progressing: condition(metav1.ConditionFalse, reason, msg),
	}), true
}

// resetsJetStream: a change resets JetStream and some server to step runs
// it, so it may hold state.
func (p *planner) resetsJetStream() bool {
	reset := false
	for _, c := range p.changes {
		reset = reset || effects[c.Kind].ResetsJetStream
	}
	return reset && p.runsJetStream()
}

// runsJetStream: some server to step runs JetStream, so it may hold state.
func (p *planner) runsJetStream() bool {
	for _, s := range p.need {
		if s.Running.JetStream {
			return true
		}
	}
	return false
}

// restartAll acts on restart-all for a change that rolls anyway: the user
// chose the outage over a rolling restart.
func (p *planner) restartAll() (Decision, bool) {
	if _, ok := p.annotation(clusterv1beta1.AnnotationRestartAll); !ok {
		return Decision{}, false
	}
	reset := p.resetsJetStream()
	var streams []StreamRef
	if reset {
		streams = sortedStreams(p.in.Observation.Streams)
	}
	return p.restartAllStep(reset, streams), true
}

func (p *planner) restartAllStep(reset bool, streams []StreamRef) Decision {
	all := p.allServersTogether()
	lost, hung := p.restartAllLoss(), p.hungServers()
	if value, _ := p.annotation(clusterv1beta1.AnnotationRestartAll); (len(lost) > 0 || len(hung) > 0) && value != clusterv1beta1.RestartAllResetJetStream {
		msg := restartAllLossMessage(lost, hung)
		return p.decision(Decision{
			Hold: &Hold{Reason: clusterv1beta1.ReasonDataLossOnRestart, Message: msg,
				WaitingFor: clusterv1beta1.AnnotationRestartAll + "=" + clusterv1beta1.RestartAllResetJetStream},
			Rollout:     &clusterv1beta1.RolloutStatus{TargetRevision: p.in.TargetRevision, Pending: all},
			Progressing: condition(metav1.ConditionFalse, clusterv1beta1.ReasonDataLossOnRestart, msg),
		})
	}
	step := &Step{Kind: RestartAll, Servers: all, ResetJetStream: reset, AcceptedLoss: lost}
	if reset {
		step.ResetWhy = resetWhy(p.changes)
	}
	if reset {
		step.StreamsLeftBehind = streams
	}
	p.clear = append(p.clear, clusterv1beta1.AnnotationRestartAll)
	if _, ok := p.annotation(clusterv1beta1.AnnotationForceStep); ok {
		p.clear = append(p.clear, clusterv1beta1.AnnotationForceStep)
	}
	updated := all
	why := "restarted together by " + clusterv1beta1.AnnotationRestartAll
	if len(p.changes) > 0 {
		why += ": " + describeChanges(p.changes)
	}
	return p.decision(Decision{
		Step: step,
		Rollout: &clusterv1beta1.RolloutStatus{
			TargetRevision: p.in.TargetRevision,
			Updated:        updated,
			RestartReason:  why,
		},
		Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonRollingRestart, restartAllMessage(all, step)),
	})
}

// forceStep steps the server force-step names through a closed gate or a
// pause. An annotation naming a server with no step left is cleared.
func (p *planner) forceStep() (Decision, bool) {
	name, ok := p.annotation(clusterv1beta1.AnnotationForceStep)
	if !ok {
		return Decision{}, false
	}
	p.clear = append(p.clear, clusterv1beta1.AnnotationForceStep)
	i := slices.IndexFunc(p.need, func(s ServerState) bool { return s.Name == name })
	if i < 0 {
		return Decision{}, false
	}
	gate := evaluateGate(p.in, p.servers)
	target := p.need[i]
	rest := slices.Delete(slices.Clone(p.need), i, i+1)
	_, why := p.reloadable(target)
	d := p.stepOne(target, rest, gate, true, why)
	d.Step.AcceptedLoss = p.lossOnRestart(target)
	d.Step.QuorumLoss = groupNames(p.quorumLoss(target))
	return d, true
}

// rollOne takes the next step if the gate is open and the rollout not paused.
func (p *planner) rollOne() Decision {
	gate := evaluateGate(p.in, p.servers)
	if p.in.Paused {
		cur := p.current(gate)
		msg := pausedMessage(p.done+1, p.total, p.need[0].Name)
		return p.decision(Decision{
			Hold:        &Hold{Reason: clusterv1beta1.ReasonRolloutPaused, Message: msg},
			Rollout:     p.rolloutStatus(cur, gate),
			Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonRolloutPaused, msg),
		})
	}
	if !gate.open() {
		if target, i, ok := p.downStep(); ok {
			if lost := p.lossOnRestart(target); len(lost) > 0 || p.hungOnEphemeral(target) {
				return p.dataLossHold(target, lost)
			}
			rest := slices.Delete(slices.Clone(p.need), i, i+1)
			_, why := p.reloadable(target)
			d := p.stepOne(target, rest, gate, false, why)
			d.Step.Down = true
			d.Progressing.Message += ", which is down (" + downWhy(target) + "): restarting it cannot lower availability, and the rest of the cluster is settled without it"
			return d
		}
		return p.waitForGate(gate, p.need[0].Name)
	}
	reload, why := p.reloadable(p.need[0])
	if reload {
		return p.reloadStep(p.need[0], p.need[1:])
	}
	if lost := p.lossOnRestart(p.need[0]); len(lost) > 0 {
		return p.dataLossHold(p.need[0], lost)
	}
	lost := p.quorumLoss(p.need[0])
	if len(lost) > 0 && !p.in.AcceptQuorumLoss {
		return p.quorumHold(p.need[0], lost)
	}
	d := p.stepOne(p.need[0], p.need[1:], gate, false, why)
	d.Step.QuorumLoss = groupNames(lost)
	d.Taken = p.taken(d)
	return d
}

// taken is a restart step's status once taken: its server does not run the
// target until its pod is replaced, so the rollout waits for
// GateTargetRevision at least, with the same current, updated and pending
// servers; the message is the one waitForGate gives that wait. The sync
// after the step, which finds that gate closed first (a server that stays
// settled while it shuts down: one without Raft groups), has nothing to
// write; one that finds another check closed first writes that one, as it
// would without this.
func (p *planner) taken(d Decision) *Taken {
	r := d.Rollout.DeepCopy()
	since := p.in.Now.Rfc3339Copy()
	r.Gate = &clusterv1beta1.Gate{WaitingFor: clusterv1beta1.GateTargetRevision, Since: &since}
	progressing := d.Progressing
	progressing.Message = p.withClaimWaits(joinNonEmpty(
		waitingMessage("restarting", r.Current, "", p.done+1, p.total, p.done+1, clusterv1beta1.GateTargetRevision, false, 0, ""),
		p.startProblems()))
	return &Taken{Rollout: r, Progressing: progressing}
}

// stepOne restarts one server; why is the restart reason
// (status.rollout.restartReason), kept from an earlier step of the rollout.
func (p *planner) stepOne(target ServerState, rest []ServerState, gate gateResult, forced bool, why string) Decision {
	msg := stepMessage(target.Name, p.done+1, p.total, forced, gate, p.in.Paused)
	return p.decision(Decision{
		Step: &Step{Kind: RestartOne, Servers: []string{target.Name}, Forced: forced},
		Rollout: &clusterv1beta1.RolloutStatus{
			TargetRevision: p.in.TargetRevision,
			Updated:        names(p.stepped),
			Current:        target.Name,
			Pending:        names(rest),
			RestartReason:  why,
		},
		Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonRollingRestart, msg),
	})
}

// waitForGate holds while the gate is closed (or, after the last step, until
// every server reports the target). next is the server the gate is before,
// empty after the last step.
func (p *planner) waitForGate(gate gateResult, next string) Decision {
	cur := p.current(gate)
	reason, verb := clusterv1beta1.ReasonRollingRestart, "restarting"
	if p.reloading(cur, next) {
		reason, verb = clusterv1beta1.ReasonReloading, "reloading"
	}
	return p.wait(p.rolloutStatus(cur, gate), gate, reason,
		func(waitingFor string, blocked bool, waited time.Duration, detail string) string {
			return waitingMessage(verb, cur, next, p.position(cur), p.total, p.done, waitingFor, blocked, waited, detail)
		})
}

// reloading says whether the wait is about a reload: the current server was
// reloaded, or, with none current, the next one reloads.
func (p *planner) reloading(cur, next string) bool {
	find := func(name string, in []ServerState) (ServerState, bool) {
		i := slices.IndexFunc(in, func(s ServerState) bool { return s.Name == name })
		if i < 0 {
			return ServerState{}, false
		}
		return in[i], true
	}
	if cur != "" {
		s, ok := find(cur, p.stepped)
		return ok && p.in.reloaded(s)
	}
	if s, ok := find(next, p.need); ok {
		r, _ := p.reloadable(s)
		return r
	}
	return false
}

// wait holds with reason, or GateBlocked once the gate has been closed on
// the same check for GateBlockedAfter; describe gives the message from the
// closed check (PodsReady when the gate is open but some server does not run
// its target yet), whether it is blocked, for how long and what fails.
func (p *planner) wait(st *clusterv1beta1.RolloutStatus, gate gateResult, reason string,
	describe func(waitingFor string, blocked bool, waited time.Duration, detail string) string) Decision {
	waitingFor, detail := gate.waitingFor, gate.detail
	if gate.open() {
		// Only reachable after the last step: the gate is open but some
		// server does not yet run the target (e.g. a pod being created).
		waitingFor, detail = clusterv1beta1.GatePodsReady, "not every server runs the target revision"
	}
	var since time.Time
	if st.Gate != nil && st.Gate.Since != nil {
		since = st.Gate.Since.Time
	}
	waited := p.in.Now.Sub(since)
	if waited >= GateBlockedAfter {
		reason = clusterv1beta1.ReasonGateBlocked
	}
	msg := describe(waitingFor, reason == clusterv1beta1.ReasonGateBlocked, waited, detail)
	if problems := p.startProblems(); problems != "" {
		msg += "; " + problems
	}
	return p.decision(Decision{
		Hold:        &Hold{Reason: reason, Message: msg, WaitingFor: waitingFor},
		Rollout:     st,
		Progressing: condition(metav1.ConditionTrue, reason, msg),
	})
}

// current is the server being stepped: it stays put while its gate is closed
// so status does not flap. It is status.rollout.current as last written while
// that server is at the target; otherwise the one stepped server that does
// not yet run the target, if exactly one (a controller that lost its status
// mid-step finds it again).
func (p *planner) current(gate gateResult) string {
	prev := p.in.Previous
	if prev != nil && prev.TargetRevision == p.in.TargetRevision && prev.Current != "" {
		if slices.ContainsFunc(p.stepped, func(s ServerState) bool { return s.Name == prev.Current }) {
			return prev.Current
		}
	}
	var unconfirmed []string
	for _, s := range p.stepped {
		if !s.PodReady || !p.in.reportsTarget(s) {
			unconfirmed = append(unconfirmed, s.Name)
		}
	}
	if len(unconfirmed) == 1 {
		return unconfirmed[0]
	}
	return ""
}

// position is the 1-based place of a step among all servers, counted as the
// servers whose template is the target: with a current server, its own place;
// before a step, the place of the next server. For demo-0..demo-2 with demo-2
// already stepped: current demo-2 -> 1 ("restarting demo-2 (1 of 3)"); no
// current -> 2 ("before restarting demo-1 (2 of 3)").
func (p *planner) position(cur string) int {
	if cur != "" {
		return p.done
	}
	return p.done + 1
}

// rolloutStatus is status.rollout while waiting; the gate's since is carried
// over from the previous status while the same check stays closed.
func (p *planner) rolloutStatus(cur string, gate gateResult) *clusterv1beta1.RolloutStatus {
	st := &clusterv1beta1.RolloutStatus{
		TargetRevision: p.in.TargetRevision,
		Current:        cur,
		Pending:        names(p.need),
	}
	for _, s := range p.stepped {
		if s.Name != cur {
			st.Updated = append(st.Updated, s.Name)
		}
	}
	waitingFor := gate.waitingFor
	if waitingFor == "" && len(p.need) == 0 {
		waitingFor = clusterv1beta1.GatePodsReady
	}
	if waitingFor != "" {
		since := p.in.Now.Rfc3339Copy()
		if prev := p.in.Previous; prev != nil && prev.TargetRevision == p.in.TargetRevision &&
			prev.Gate != nil && prev.Gate.WaitingFor == waitingFor && prev.Gate.Since != nil && !prev.Gate.Since.After(p.in.Now.Time) {
			since = *prev.Gate.Since.DeepCopy()
		}
		st.Gate = &clusterv1beta1.Gate{WaitingFor: waitingFor, Since: &since}
	}
	return st
}

// decision finishes a Decision with the changes, the annotations to clear,
// the servers to create, whether the hold notifies, and when to look again.
func (p *planner) decision(d Decision) Decision {
	d.Changes = p.changes
	if r, prev := d.Rollout, p.in.Previous; r != nil && prev != nil && prev.TargetRevision == r.TargetRevision &&
		prev.RestartReason != "" && (r.RestartReason == "" || d.Step == nil || d.Step.Kind != RestartOne) {
		// The first restart's reason stands for the rollout.
		r.RestartReason = prev.RestartReason
	}
	if len(p.clear) > 0 {
		d.ClearAnnotations = sortedCopy(append(d.ClearAnnotations, p.clear...))
	}
	d.Create = p.create
	d.Progressing.Message = p.withClaimWaits(d.Progressing.Message)
	return finish(d)
}

// withClaimWaits adds to a Progressing message the servers waiting for
// their old claim to go.
func (p *planner) withClaimWaits(msg string) string {
	if len(p.claimWaits) == 0 {
		return msg
	}
	return joinNonEmpty(msg, strings.Join(p.claimWaits, ", ")+
		" waits for its old claim, still being deleted, to go before it is created")
}

// finish sets what follows from the rest of a Decision: whether its hold
// notifies, and whether to look again within a second (a step taken, a
// rollout in flight, or a hold that NATS itself releases: a stream raised to
// more replicas catches up).
func finish(d Decision) Decision {
	if d.Hold != nil {
		d.Hold.Notify = Notifies(d.Hold.Reason)
	}
	d.Soon = d.Step != nil || d.Progressing.Status == metav1.ConditionTrue ||
		d.Progressing.Reason == clusterv1beta1.ReasonDataLossOnRestart || d.Progressing.Reason == clusterv1beta1.ReasonQuorumLossOnRestart
	return d
}

// Notifies says whether a Progressing reason is a hold that needs the
// user's attention, so an Event marks its start and end: every hold but
// waiting for the gate or for NATS (RollingRestart, Reloading, ScalingUp,
// ScalingDown, ReplacingServer, ExpandingStorage),
// and no state that is not a hold. Deleting is a hold: the deletion waits
// for the user to delete the streams or annotate force-delete.
func Notifies(reason string) bool {
	switch reason {
	case clusterv1beta1.ReasonRollingRestart, clusterv1beta1.ReasonReloading, clusterv1beta1.ReasonScalingUp, clusterv1beta1.ReasonScalingDown,
		clusterv1beta1.ReasonReplacingServer, clusterv1beta1.ReasonExpandingStorage, clusterv1beta1.ReasonMigratingJetStream,
		clusterv1beta1.ReasonUpToDate, clusterv1beta1.ReasonCreating, "":
		return false
	}
	return true
}

func condition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: clusterv1beta1.ConditionProgressing, Status: status, Reason: reason, Message: message}
}

func names(servers []ServerState) []string {
	if len(servers) == 0 {
		return nil
	}
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Name
	}
	return out
}

func sortedStreams(streams []StreamRef) []StreamRef {
	out := slices.Clone(streams)
	slices.SortFunc(out, func(a, b StreamRef) int {
		return cmp.Or(cmp.Compare(a.Account, b.Account), cmp.Compare(a.Name, b.Name))
	})
	return slices.Compact(out)
}
