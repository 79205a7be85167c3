package rollout

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// gateCheck is one named check of the gate before a step. It returns the empty
// string when the check passes, else what fails (for the GateBlocked message).
type gateCheck struct {
	name  string
	check func(in *Input, servers []ServerState) string
}

// gateChecks are evaluated in this order; the first that fails closes the
// gate and is named in status.rollout.gate.waitingFor (cert-manager's
// policy-chain style: an ordered slice, first failure wins).
var gateChecks = []gateCheck{
	{clusterv1beta1.GateObserved, checkObserved},
	{clusterv1beta1.GateSettled, checkSettled},
	{clusterv1beta1.GateMetaMembership, checkMetaMembership},
	{clusterv1beta1.GatePodsReady, checkPodsReady},
	{clusterv1beta1.GateTargetRevision, checkTargetRevision},
}

// gateResult is the first failing check, or an open gate.
type gateResult struct {
	// waitingFor is the failing check's name; empty when the gate is open.
	waitingFor string
	// detail says what fails.
	detail string
}

func (g gateResult) open() bool { return g.waitingFor == "" }

// evaluateGate runs the gate checks in order; servers are sorted by ordinal.
func evaluateGate(in *Input, servers []ServerState) gateResult {
	for _, c := range gateChecks {
		if d := c.check(in, servers); d != "" {
			return gateResult{waitingFor: c.name, detail: d}
		}
	}
	return gateResult{}
}

// checkObserved: a Snapshot exists. Without one nothing is known, and nothing
// may be restarted.
func checkObserved(in *Input, _ []ServerState) string {
	if in.Observation.Observed {
		return ""
	}
	if m := in.Observation.Settled.Message; m != "" {
		return m
	}
	return "the NATS cluster is not observed"
}

// checkSettled: every expected server answered, every Raft group has a leader
// and every member is current, as NATS itself reports.
func checkSettled(in *Input, _ []ServerState) string {
	v := in.Observation.Settled
	if v.Status == metav1.ConditionTrue {
		return ""
	}
	switch {
	case v.Message != "":
		return v.Message
	case v.Reason != "":
		return v.Reason
	default:
		return "the NATS cluster is not settled"
	}
}

// checkMetaMembership: every server running with JetStream is a member of the
// JetStream meta group, so no restart can cost the meta group its quorum by
// surprise. A standalone server (one JetStream server, no cluster block)
// has no meta group: nothing to wait for.
func checkMetaMembership(in *Input, servers []ServerState) string {
	members := map[string]bool{}
	for _, m := range in.Observation.MetaMembers {
		members[m] = true
	}
	var missing []string
	for _, s := range servers {
		if !runsJetStream(in, s) || runsStandalone(in, s) {
			continue
		}
		if !members[s.Name] {
			missing = append(missing, s.Name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("%s %s not in the JetStream meta group", strings.Join(missing, ", "), isAre(len(missing)))
}

// runsJetStream says whether a server runs (or will run, once created) with
// JetStream.
func runsJetStream(in *Input, s ServerState) bool {
	if !s.Created || in.atTarget(s) {
		return in.Target.JetStream
	}
	return s.Running.JetStream
}

// runsStandalone says whether a server runs (or will run) JetStream
// standalone: without a cluster name (render writes no cluster block for one
// JetStream server).
func runsStandalone(in *Input, s ServerState) bool {
	if !s.Created || in.atTarget(s) {
		return in.Target.JetStream && in.Target.ClusterName == ""
	}
	return s.Running.JetStream && s.Running.ClusterName == ""
}

// checkPodsReady: every server's pod exists and is Ready.
func checkPodsReady(_ *Input, servers []ServerState) string {
	var missing, unready []string
	for _, s := range servers {
		switch {
		case !s.PodExists:
			missing = append(missing, s.Name)
		case !s.PodReady:
			unready = append(unready, s.Name)
		}
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("the pod of %s does not exist", strings.Join(missing, ", ")))
	}
	if len(unready) > 0 {
		parts = append(parts, fmt.Sprintf("the pod of %s is not Ready", strings.Join(unready, ", ")))
	}
	return strings.Join(parts, "; ")
}

// checkTargetRevision: every server already stepped to the target reports the
// target revision itself. A Ready pod is not proof of the new config; the
// server's own report is.
func checkTargetRevision(in *Input, servers []ServerState) string {
	var parts []string
	for _, s := range servers {
		if !in.atTarget(s) {
			continue
		}
		switch {
		case !s.Answered:
			parts = append(parts, fmt.Sprintf("%s did not answer", s.Name))
		case s.ReportedRevision != in.targetOf(s):
			parts = append(parts, fmt.Sprintf("%s reports revision %s, not %s", s.Name, orNone(s.ReportedRevision), in.targetOf(s)))
		}
	}
	return strings.Join(parts, ", ")
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
