package rollout

import (
	"fmt"
	"slices"
	"strings"
)

// A server that is itself down (its pod not Ready, and it does not answer
// or is no current member of the meta group) cannot serve: restarting it
// cannot make the cluster less available. Yet the gate waits for the whole
// cluster to be Settled, which it cannot be while that server is down: a
// version that cannot start, then reverted, would wait forever (the founding
// bug's shape). So the planner lets the step of a down server through when
// the gate is open for the rest of the cluster: every other server answers,
// is Ready and reports its revision, every group has a leader other than it
// and every other member is current, and the meta group keeps its quorum
// without it. It must also be a current member of no group, so the step
// lowers no group's count of current members: the invariant the simulation
// checks after every step.

// down says whether s is down in the sense above.
func (p *planner) down(s ServerState) bool {
	if s.PodReady {
		return false
	}
	return !s.Answered || !slices.Contains(p.in.Observation.MetaCurrent, s.Name)
}

// currentSomewhere says whether server is a current member of any group.
func (p *planner) currentSomewhere(server string) bool {
	obs := &p.in.Observation
	if slices.Contains(obs.MetaCurrent, server) || obs.MetaLeader == server {
		return true
	}
	for _, a := range obs.Assets {
		if slices.Contains(a.Current, server) || a.Leader == server {
			return true
		}
	}
	return false
}

// gateWithout is the gate for the rest of the cluster without server: ""
// when open, else what fails.
func (p *planner) gateWithout(server string) string {
	in := p.in
	obs := &in.Observation
	if !obs.Observed {
		return checkObserved(in, nil)
	}
	var others []ServerState
	for _, s := range p.servers {
		if s.Name != server {
			others = append(others, s)
		}
	}
	var silent []string
	for _, s := range others {
		if !s.Answered {
			silent = append(silent, s.Name)
		}
	}
	if len(silent) > 0 {
		return strings.Join(silent, ", ") + " did not answer either"
	}
	if len(others) == 0 {
		// A cluster of one server: nothing else to keep up.
		return ""
	}
	if !in.Target.JetStream && !slices.ContainsFunc(p.servers, func(s ServerState) bool { return s.Running.JetStream }) {
		// No JetStream, so no meta group or stream to keep.
		return p.gateOthers(others)
	}
	if obs.MetaLeader == "" || obs.MetaLeader == server {
		return "the meta group has no leader without " + server
	}
	current := 0
	for _, m := range obs.MetaMembers {
		switch {
		case m == server:
		case slices.Contains(obs.MetaCurrent, m):
			current++
		default:
			return fmt.Sprintf("%s is not current in the meta group", m)
		}
	}
	if current <= len(obs.MetaMembers)/2 {
		return fmt.Sprintf("the meta group has %d current members of %d without %s: no quorum", current, len(obs.MetaMembers), server)
	}
	for _, a := range obs.Assets {
		var rest []string
		for _, m := range a.Members {
			if m != server {
				rest = append(rest, m)
			}
		}
		if len(rest) == 0 {
			continue // only on server: restarting it cannot make it worse
		}
		if a.Leader == "" || a.Leader == server {
			return fmt.Sprintf("%s has no leader without %s", a.Name, server)
		}
		for _, m := range rest {
			if !slices.Contains(a.Current, m) {
				return fmt.Sprintf("%s is not current in %s", m, a.Name)
			}
		}
	}
	return p.gateOthers(others)
}

// gateOthers: the other servers are members, Ready and at their target.
func (p *planner) gateOthers(others []ServerState) string {
	for _, c := range []func(*Input, []ServerState) string{checkMetaMembership, checkPodsReady, checkTargetRevision} {
		if d := c(p.in, others); d != "" {
			return d
		}
	}
	return ""
}

// downStep picks the first server to step, in step order, that is down,
// current in no group, and whose gate without it is open.
func (p *planner) downStep() (ServerState, int, bool) {
	for i, s := range p.need {
		if p.down(s) && !p.currentSomewhere(s.Name) && p.gateWithout(s.Name) == "" {
			return s, i, true
		}
	}
	return ServerState{}, 0, false
}

// startProblems says which servers cannot start and why, with the way out:
// "demo-2 cannot start 2.15.99: ErrImagePull: ...; revert spec.version or
// fix the image".
func (p *planner) startProblems() string {
	var parts []string
	for _, s := range p.servers {
		if s.StartProblem == "" {
			continue
		}
		version := s.Running.Version
		if !s.Created || p.in.atTarget(s) {
			version = p.in.Target.Version
		}
		parts = append(parts, fmt.Sprintf("%s cannot start %s: %s", s.Name, orNone(version), s.StartProblem))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "; revert spec.version or fix the image (spec.image)"
}

// downWhy: "its pod is not Ready and it does not answer; ErrImagePull: ...".
func downWhy(s ServerState) string {
	why := "its pod is not Ready and it does not answer"
	if s.Answered {
		why = "its pod is not Ready and it is not current in the meta group"
	}
	if s.StartProblem != "" {
		why += "; " + s.StartProblem
	}
	return why
}

// joinNonEmpty joins the non-empty parts with "; ".
func joinNonEmpty(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}
