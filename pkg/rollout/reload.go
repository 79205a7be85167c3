package rollout

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Config reloads. A server whose changes all reload (Effect.Reloads,
// ReloadsWithoutAuth on a cluster without auth, or ReloadsWithMemoryResolver
// on one in operator mode on the memory resolver), whose pod template stays the
// same and whose config the controller can ask it to reload (Input.CanReload)
// is stepped by a Reload step instead of a restart, behind the same gate and
// in the same order. The step records the reload on the server's StatefulSet
// before writing its ConfigMap, so the reload is known to be in flight after
// that even though the ConfigMap then holds the target (its facts no longer
// show the change). While in flight, each sync takes the Reload step again,
// which asks the server to reload until it reports its target revision (a
// kubelet takes up to a minute to update the mounted file), then records it
// Done. A reload nats-server refuses (Refused), or one not confirmed within
// Input.ReloadTimeout, becomes a restart of that server, the reason in
// status.rollout.restartReason and, once up to date, in
// status.config.restartReason.

// reloaded says the server was reloaded onto its target.
func (in *Input) reloaded(s ServerState) bool {
	return s.Reload.Revision != "" && s.Reload.Revision == in.targetOf(s) && s.Reload.Phase == ReloadDone
}

// reloadInFlight says a reload of the server onto its target started and
// has not ended.
func (in *Input) reloadInFlight(s ServerState) bool {
	return s.Reload.Revision != "" && s.Reload.Revision == in.targetOf(s) && s.Reload.Phase == ReloadStarted
}

// reloadRefused says nats-server refused to reload the server's target.
func (in *Input) reloadRefused(s ServerState) bool {
	return s.Reload.Revision != "" && s.Reload.Revision == in.targetOf(s) && s.Reload.Phase == ReloadRefused
}

// reloadsKind says whether a change of this kind reloads on this cluster.
func (in *Input) reloadsKind(k ChangeKind) bool {
	e := effects[k]
	switch {
	case e.Reloads:
		return true
	case in.Target.Operator == "":
		return e.ReloadsWithoutAuth
	case in.Target.Resolver == MemoryResolver:
		return e.ReloadsWithMemoryResolver
	}
	return false
}

// reloadable says whether the server's step can be a reload, and if not,
// why it restarts (for restartReason).
func (p *planner) reloadable(s ServerState) (bool, string) {
	in := p.in
	if s.Stopped {
		return false, fmt.Sprintf("%s is stopped (scaled to 0): only a restart starts it", s.Name)
	}
	if in.reloadRefused(s) {
		return false, fmt.Sprintf("nats-server refused to reload %s: %s", s.Name, s.Reload.Message)
	}
	if s.PodBehindTemplate {
		return false, fmt.Sprintf("the pod of %s was started from an older template than its StatefulSet's (a step cut short): only replacing the pod applies it", s.Name)
	}
	if s.TemplateRevision != s.TargetTemplateRevision {
		if why := restartOnly(in, Classify(s.Running, in.Target)); why != "" {
			return false, why
		}
		switch {
		case len(s.TemplateChanges) == 1 && s.TemplateChanges[0] == "labels or annotations":
			return false, fmt.Sprintf("the pod template of %s changes only its labels or annotations: the server itself would not need a restart, but a pod takes a new template only by being replaced", s.Name)
		case len(s.TemplateChanges) > 0:
			return false, fmt.Sprintf("the pod template of %s changes (%s), which only a restart applies", s.Name, strings.Join(s.TemplateChanges, ", "))
		}
		return false, fmt.Sprintf("the pod template of %s changes (image, resources or probes), which only a restart applies", s.Name)
	}
	if s.ConfigRevision != s.RestartRevision && !(s.Reload.Revision == s.ConfigRevision && s.Reload.Phase == ReloadDone) &&
		!(s.Answered && s.ReportedRevision == s.ConfigRevision) {
		// The ConfigMap is ahead of what the pod was restarted for or
		// reloaded (a step cut short), and the server does not report its
		// revision (a reload the controller has not recorded Done yet):
		// what the server runs is not known, so the ConfigMap's facts
		// cannot say the change reloads.
		return false, fmt.Sprintf("the ConfigMap of %s holds a config its server neither restarted for nor reloaded", s.Name)
	}
	changes := Classify(s.Running, in.Target)
	if len(changes) == 0 {
		return false, fmt.Sprintf("the config of %s changes beyond what a reload is proven to apply", s.Name)
	}
	if why := restartOnly(in, changes); why != "" {
		return false, why
	}
	if !in.CanReload {
		return false, in.NoReload
	}
	return true, ""
}

// restartOnly names the changes that do not reload ("version 2.15.1 ->
// 2.15.2 cannot be reloaded"); empty when every change reloads.
func restartOnly(in *Input, changes []Change) string {
	var parts []string
	// onMemory: every change that does not reload here would reload in
	// operator mode on the memory resolver.
	onMemory := in.Target.Operator != "" && in.Target.Resolver != MemoryResolver
	for _, c := range changes {
		if !in.reloadsKind(c.Kind) {
			parts = append(parts, c.String())
			onMemory = onMemory && effects[c.Kind].ReloadsWithMemoryResolver
		}
	}
	if len(parts) == 0 {
		return ""
	}
	why := strings.Join(parts, " and ") + " cannot be reloaded"
	if onMemory {
		// Measured by the reload matrix: in operator mode a reload leaves
		// the server with a full or cache account resolver it never starts;
		// the memory resolver needs no starting.
		why += " with a full or cache resolver (a reload stops the server fetching accounts from its peers); with spec.auth.resolver Memory it would reload"
	}
	return why
}

// continueReload takes the step of a reload in flight, before any other:
// the server is asked again until it reports its target revision, then the
// reload is recorded Done; past ReloadTimeout it is restarted instead, behind
// the gate.
func (p *planner) continueReload() (Decision, bool) {
	i := slices.IndexFunc(p.need, p.in.reloadInFlight)
	if i < 0 {
		return Decision{}, false
	}
	s := p.need[i]
	rev := p.in.targetOf(s)
	rest := slices.Delete(slices.Clone(p.need), i, i+1)
	confirmed := s.Answered && s.ReportedRevision == rev
	if !confirmed && p.in.ReloadTimeout > 0 && p.in.Now.Sub(s.Reload.Since.Time) >= p.in.ReloadTimeout {
		why := fmt.Sprintf("%s did not report revision %s within %s of its reload", s.Name, rev, p.in.ReloadTimeout)
		gate := evaluateGate(p.in, p.servers)
		if !gate.open() {
			return p.waitForGate(gate, s.Name), true
		}
		d := p.stepOne(s, rest, gate, false, why)
		return d, true
	}
	msg := fmt.Sprintf("reloading %s (%d of %d)", s.Name, p.done+1, p.total)
	if !confirmed {
		msg += fmt.Sprintf("; waiting for it to report revision %s", rev)
	}
	return p.decision(Decision{
		Step: &Step{Kind: Reload, Reload: &ReloadStep{Server: s.Name, Revision: rev, Confirmed: confirmed, Stage: p.stage(rest)}},
		Rollout: &clusterv1beta1.RolloutStatus{
			TargetRevision: p.in.TargetRevision,
			Updated:        names(p.stepped),
			Current:        s.Name,
			Pending:        names(rest),
		},
		Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonReloading, msg),
	}), true
}

// reloadStep starts the reload of a server (the gate is open).
func (p *planner) reloadStep(s ServerState, rest []ServerState) Decision {
	msg := fmt.Sprintf("reloading %s (%d of %d)", s.Name, p.done+1, p.total)
	return p.decision(Decision{
		Step: &Step{Kind: Reload, Reload: &ReloadStep{Server: s.Name, Revision: p.in.targetOf(s), Stage: p.stage(rest)}},
		Rollout: &clusterv1beta1.RolloutStatus{
			TargetRevision: p.in.TargetRevision,
			Updated:        names(p.stepped),
			Current:        s.Name,
			Pending:        names(rest),
		},
		Progressing: condition(metav1.ConditionTrue, clusterv1beta1.ReasonReloading, msg),
	})
}

// stage names the servers of rest whose own steps would be reloads and
// whose target is not staged yet (ReloadStep.Stage); nil when none.
func (p *planner) stage(rest []ServerState) []string {
	var out []string
	for _, s := range rest {
		if s.StagedRevision == p.in.targetOf(s) || p.in.reloadInFlight(s) {
			continue
		}
		if ok, _ := p.reloadable(s); ok {
			out = append(out, s.Name)
		}
	}
	return out
}

// applied is how the rollout that ends up to date reached the servers:
// Restart with its reason when it restarted any server (its restart reason
// is then set, carried in status.rollout), or when the cluster was created;
// Reload when servers were reloaded and none restarted; empty when it did
// neither (servers added by a scale-up).
func (p *planner) applied() (clusterv1beta1.ConfigAppliedBy, string) {
	in := p.in
	if prev := in.Previous; prev != nil && prev.TargetRevision == in.TargetRevision && prev.RestartReason != "" {
		return clusterv1beta1.AppliedByRestart, prev.RestartReason
	}
	if in.ConvergedRevision == "" {
		return clusterv1beta1.AppliedByRestart, ""
	}
	if slices.ContainsFunc(p.servers, in.reloaded) {
		return clusterv1beta1.AppliedByReload, ""
	}
	return "", ""
}
