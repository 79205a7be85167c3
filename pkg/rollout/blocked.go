package rollout

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// atTarget says a server's objects are at the target: its ConfigMap holds
// the target config, its template is the target template, and its pod was
// last restarted for the target config (the step that restarts it writes the
// ConfigMap first) or reloaded it, and it is not stopped (a scale-down
// stopped it, then spec.replicas went back up: its restart starts it), and
// its running pod was started from that template (a step cut short after
// the template write leaves the old pod running: PodBehindTemplate).
// Whether the pod runs the config is for the server to report.
func (in *Input) atTarget(s ServerState) bool {
	rev := in.targetOf(s)
	return s.Created && !s.Stopped && s.ConfigRevision == rev && (s.RestartRevision == rev || in.reloaded(s)) &&
		s.TemplateRevision == s.TargetTemplateRevision && !s.PodBehindTemplate
}

// targetOf is the config revision the target renders for a server.
func (in *Input) targetOf(s ServerState) string {
	if s.TargetConfigRevision != "" {
		return s.TargetConfigRevision
	}
	return in.TargetRevision
}

// reportsTarget says the server answered and reports its target revision.
func (in *Input) reportsTarget(s ServerState) bool {
	return s.Answered && s.ReportedRevision == in.targetOf(s)
}

// blocked holds a target that cannot be computed or acted on.
func blocked(b *Blocked) Decision {
	msg := b.Message + "; no server was changed"
	return finish(Decision{
		Hold:        &Hold{Reason: b.Reason, Message: msg},
		Progressing: condition(metav1.ConditionFalse, b.Reason, msg),
	})
}
