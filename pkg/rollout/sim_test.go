package rollout

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// The simulation drives Plan against a model cluster, the way the
// statefulset controller's tests step a simulated cluster: every tick the
// model is turned into an Input, Plan decides, the controller's part (apply
// the step, write status, clear annotations, set config.revision once up to
// date) is applied to the model, and time advances. Servers restart over a
// few ticks, their Raft groups catch up over a few more, the meta leader is
// re-elected when it goes away; random faults crash servers, keep a pod from
// ever becoming Ready, and make observation fail. Invariants are checked
// after every tick.

type simServer struct {
	name      string
	ordinal   int
	template  string      // the StatefulSet's template revision
	given     ConfigFacts // the config in its ConfigMap
	running   string      // the revision its process runs; "" while down
	facts     ConfigFacts // the facts its process runs
	down      int         // ticks until its process is up again
	byStep    bool        // down because a step restarted it
	byBulk    bool        // down because of a forced step or restart-all
	podGone   bool        // its pod does not exist this tick
	lag       int         // ticks until its Raft groups are current
	stuck     bool        // permanent fault: its pod never becomes Ready
	joinedJS  bool        // a member of the JetStream meta group
	everSplit bool
}

type simCluster struct {
	rng         *rand.Rand
	servers     []*simServer
	leader      string
	target      string
	targetFacts ConfigFacts
	converged   string
	status      []byte // status.rollout as JSON, as the API server stores it
	annotations map[string]string
	paused      bool
	now         time.Time
	streams     []StreamRef
	// groups are replicated streams (R2, R3) and their members; the meta
	// group is every server that joined JetStream.
	groups           []simGroup
	acceptQuorumLoss bool
	obsFault         bool
	revs             int
}

type simGroup struct {
	name    string
	members []string
}

// current says whether a server's Raft groups are current: up, caught up,
// in the meta group.
func (s *simServer) current() bool { return s.down == 0 && s.lag == 0 && s.joinedJS }

// currentOf are the group's current members.
func (c *simCluster) currentOf(members []string) []string {
	var out []string
	for _, m := range members {
		if c.server(m).current() {
			out = append(out, m)
		}
	}
	return out
}

// metaMembers are the servers that joined JetStream.
func (c *simCluster) metaMembers() []string {
	var out []string
	for _, s := range c.servers {
		if s.joinedJS {
			out = append(out, s.name)
		}
	}
	return out
}

func (c *simCluster) server(name string) *simServer {
	for _, s := range c.servers {
		if s.name == name {
			return s
		}
	}
	return nil
}

// split says whether two running servers could not work together.
func (c *simCluster) split() bool {
	var up []*simServer
	for _, s := range c.servers {
		if s.down == 0 {
			up = append(up, s)
		}
	}
	for i := range up {
		for j := i + 1; j < len(up); j++ {
			for _, ch := range Classify(up[i].facts, up[j].facts) {
				if effects[ch.Kind].Splits {
					return true
				}
			}
		}
	}
	return false
}

// settled is the model's truth: every server up, current, one leader, no split.
func (c *simCluster) settled() bool {
	if c.leader == "" || c.split() {
		return false
	}
	for _, s := range c.servers {
		if s.down > 0 || s.lag > 0 || !s.joinedJS {
			return false
		}
	}
	return true
}

func (c *simCluster) input() Input {
	in := Input{
		Cluster:           "demo",
		TargetRevision:    c.target,
		Target:            c.targetFacts,
		ConvergedRevision: c.converged,
		Annotations:       maps(c.annotations),
		Paused:            c.paused,
		AcceptQuorumLoss:  c.acceptQuorumLoss,
		Now:               metav1.NewTime(c.now),
	}
	if c.status != nil {
		in.Previous = &clusterv1beta1.RolloutStatus{}
		if err := json.Unmarshal(c.status, in.Previous); err != nil {
			panic(err)
		}
	}
	for _, s := range c.servers {
		up := s.down == 0
		st := ServerState{
			Name: s.name, Ordinal: s.ordinal,
			PodExists: !s.podGone, PodReady: up && !s.stuck && !s.podGone,
			Answered: up && !c.obsFault, ReportedRevision: s.running, Running: s.given,
		}
		objectsAt(&st, s.template)
		in.Servers = append(in.Servers, st)
	}
	if c.obsFault {
		in.Observation = Observation{Settled: Verdict{Status: metav1.ConditionUnknown, Reason: clusterv1beta1.ReasonObservationFailed, Message: "observation failed"}}
		return in
	}
	in.Observation.Observed = true
	if c.settled() {
		in.Observation.Settled = Verdict{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonAllGroupsCurrent}
	} else {
		in.Observation.Settled = Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonGroupsCatchingUp, Message: "catching up"}
	}
	if !c.split() {
		in.Observation.MetaLeader = c.leader
	}
	in.Observation.MetaMembers = c.metaMembers()
	in.Observation.MetaCurrent = c.currentOf(in.Observation.MetaMembers)
	for _, g := range c.groups {
		in.Observation.Assets = append(in.Observation.Assets, Asset{Account: GlobalAccount, Name: g.name, Members: g.members, Current: c.currentOf(g.members)})
	}
	in.Observation.Streams = slices.Clone(c.streams)
	return in
}

func maps(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// apply is the controller's part of a sync.
func (c *simCluster) apply(d Decision) {
	d = d.OnceTaken() // every step is taken here
	if d.Rollout != nil {
		b, err := json.Marshal(d.Rollout)
		if err != nil {
			panic(err)
		}
		c.status = b
	} else {
		c.status = nil
	}
	if d.Progressing.Reason == clusterv1beta1.ReasonUpToDate {
		c.converged = c.target
	}
	for _, k := range d.ClearAnnotations {
		delete(c.annotations, k)
	}
	if d.Step == nil {
		return
	}
	bulk := d.Step.Forced || d.Step.Kind == RestartAll
	for _, name := range d.Step.Servers {
		s := c.server(name)
		s.template, s.given = c.target, c.targetFacts
		s.down, s.byStep, s.byBulk, s.podGone, s.running = 1+c.rng.IntN(3), true, bulk, true, ""
	}
	if d.Step.ResetJetStream {
		c.streams = nil
		for _, s := range c.servers {
			s.joinedJS = false
		}
	}
}

// advance moves time on: processes come up, groups catch up, a leader is
// elected, and faults strike while faults is true.
func (c *simCluster) advance(faults bool) {
	c.now = c.now.Add(time.Duration(10+c.rng.IntN(50)) * time.Second)
	for _, s := range c.servers {
		s.podGone = false
		switch {
		case s.down > 0:
			s.down--
			if s.down == 0 {
				s.running, s.facts, s.byStep, s.byBulk, s.lag = s.template, s.given, false, false, c.rng.IntN(4)
				if s.name == c.leader {
					c.leader = ""
				}
			}
		case s.lag > 0:
			s.lag--
		}
	}
	if c.leader != "" && c.server(c.leader).down > 0 {
		c.leader = ""
	}
	var up []*simServer
	for _, s := range c.servers {
		if s.down == 0 {
			up = append(up, s)
		}
	}
	if !c.split() {
		for _, s := range up {
			s.joinedJS = true
		}
		if c.leader == "" && 2*len(up) > len(c.servers) {
			c.leader = up[c.rng.IntN(len(up))].name
		}
	}
	c.obsFault = false
	if faults {
		if c.rng.IntN(12) == 0 && len(up) > 0 {
			s := up[c.rng.IntN(len(up))]
			s.down, s.running = 1+c.rng.IntN(3), ""
			if s.name == c.leader {
				c.leader = ""
			}
		}
		c.obsFault = c.rng.IntN(8) == 0
	}
}

func newSimCluster(rng *rand.Rand, n int) *simCluster {
	c := &simCluster{rng: rng, target: "r0", targetFacts: baseFacts(), converged: "r0", now: t0.Time, annotations: map[string]string{}}
	for i := 0; i < n; i++ {
		c.servers = append(c.servers, &simServer{name: fmt.Sprintf("demo-%d", i), ordinal: i, template: "r0", given: baseFacts(),
			running: "r0", facts: baseFacts(), joinedJS: true})
	}
	c.leader = c.servers[rng.IntN(n)].name
	return c
}

// retarget changes the spec: a new revision with the given facts.
func (c *simCluster) retarget(f ConfigFacts) {
	c.revs++
	c.target, c.targetFacts = fmt.Sprintf("r%d", c.revs), f
}

func TestSimulatedRollouts(t *testing.T) {
	runs := 10000
	if testing.Short() {
		runs = 1000
	}
	var upToDate, heldSeen, quorumHeld, resets, forced int
	for run := 0; run < runs; run++ {
		rng := rand.New(rand.NewPCG(uint64(run), 0x5eed))
		n := 1 + rng.IntN(7)
		c := newSimCluster(rng, n)
		if rng.IntN(2) == 0 {
			c.streams = []StreamRef{{GlobalAccount, "ORDERS"}, {GlobalAccount, "EVENTS"}}
			// Replicated: ORDERS R2 on two servers, EVENTS R3 on three.
			perm := rng.Perm(n)
			if n >= 2 && rng.IntN(2) == 0 {
				c.groups = append(c.groups, simGroup{"ORDERS", []string{c.servers[perm[0]].name, c.servers[perm[1]].name}})
			}
			if n >= 3 {
				c.groups = append(c.groups, simGroup{"EVENTS", []string{c.servers[perm[0]].name, c.servers[perm[1]].name, c.servers[perm[2]].name}})
			}
		}
		// The change: mostly one that rolls, sometimes adding auth, sometimes
		// another cluster name.
		f := baseFacts()
		change := rng.IntN(10)
		switch {
		case change < 6:
			f.Version = "2.15.3"
		case change < 8:
			f.Operator, f.SystemAccount = opA, sysA
		case change < 9:
			f.ClusterName = "other"
		default:
			f.ServerTags = []string{"az:1"}
		}
		c.retarget(f)
		faultTicks := rng.IntN(60)
		stuck := rng.IntN(15) == 0
		if stuck {
			c.server(fmt.Sprintf("demo-%d", rng.IntN(n))).stuck = true
		}
		pauseUntil := -1
		if rng.IntN(8) == 0 {
			c.paused, pauseUntil = true, rng.IntN(30)
		}
		retargetAt := -1
		if rng.IntN(10) == 0 {
			retargetAt = rng.IntN(40)
		}
		userActsAfter := 1 + rng.IntN(20)
		heldFor, quorumHeldFor := 0, 0
		lastWasUpToDate := false

		for tick := 0; tick < 400; tick++ {
			in := c.input()
			d := Plan(in)
			where := func() string {
				return fmt.Sprintf("run %d tick %d: n=%d change=%d\ninput %s\ndecision %s", run, tick, n, change, toJSON(in), toJSON(d))
			}
			checkTick(t, c, in, d, where)
			if t.Failed() {
				return
			}

			lastWasUpToDate = d.Progressing.Reason == clusterv1beta1.ReasonUpToDate
			if d.Hold != nil && (d.Hold.Reason == clusterv1beta1.ReasonAuthChangeBlocked || d.Hold.Reason == clusterv1beta1.ReasonUnsupportedChange) {
				heldSeen++
				heldFor++
				if heldFor >= userActsAfter {
					// The user reads the hold and annotates; with streams,
					// first without the value, later accepting the reset.
					v := ""
					if d.Hold.WaitingFor == clusterv1beta1.AnnotationRestartAll+"="+clusterv1beta1.RestartAllResetJetStream && heldFor >= 2*userActsAfter {
						v = clusterv1beta1.RestartAllResetJetStream
					}
					c.annotations[clusterv1beta1.AnnotationRestartAll] = v
				}
			}
			if d.Hold != nil && d.Hold.Reason == clusterv1beta1.ReasonQuorumLossOnRestart {
				quorumHeld++
				quorumHeldFor++
				if quorumHeldFor >= userActsAfter {
					// The user accepts: for this step, or for every step.
					if rng.IntN(2) == 0 {
						c.annotations[clusterv1beta1.AnnotationForceStep] = strings.TrimPrefix(d.Hold.WaitingFor, clusterv1beta1.AnnotationForceStep+"=")
					} else {
						c.acceptQuorumLoss = true
					}
					quorumHeldFor = 0
				}
			}
			if d.Step != nil {
				if d.Step.ResetJetStream && len(d.Step.StreamsLeftBehind) > 0 {
					resets++
				}
				if d.Step.Forced {
					forced++
				}
			}
			templates := templatesOf(c)
			c.apply(d)
			if d.Step == nil && !reflect.DeepEqual(templates, templatesOf(c)) {
				t.Fatalf("no step, yet a template changed\n%s", where())
			}
			checkAfterApply(t, c, where)

			if tick == pauseUntil {
				c.paused = false
			}
			if tick == retargetAt {
				g := c.targetFacts
				g.MaxFileStore++
				c.retarget(g)
			}
			// Now and then the user forces a stuck server on.
			if stuck && tick > 100 && tick%50 == 0 {
				for _, s := range c.servers {
					if s.stuck {
						c.annotations[clusterv1beta1.AnnotationForceStep] = s.name
						s.stuck = false // the forced restart cures it
					}
				}
			}
			c.advance(tick < faultTicks)
			if lastWasUpToDate && tick > faultTicks && tick > retargetAt && tick > pauseUntil && c.converged == c.target && c.allOnTarget() {
				break
			}
		}
		// Liveness: once faults stop (a stuck pod is cured by the user's
		// force-step after tick 100), every server ends on the target and
		// the cluster is up to date.
		if !c.allOnTarget() || c.converged != c.target {
			t.Fatalf("run %d (n=%d, change=%d, stuck=%v): not every server ends on target %s (converged %s): %v; last status %s",
				run, n, change, stuck, c.target, c.converged, c.describe(), c.status)
		}
		upToDate++
	}
	t.Logf("%d runs: %d up to date at the end, %d held ticks, %d QuorumLossOnRestart ticks, %d JetStream resets accepted, %d forced steps",
		runs, upToDate, heldSeen, quorumHeld, resets, forced)
	if quorumHeld == 0 {
		t.Errorf("no run held with QuorumLossOnRestart: the simulation does not reach the hold")
	}
}

func (c *simCluster) allOnTarget() bool {
	for _, s := range c.servers {
		if s.template != c.target || s.running != c.target || s.down > 0 {
			return false
		}
	}
	return true
}

func (c *simCluster) describe() []string {
	var out []string
	for _, s := range c.servers {
		out = append(out, fmt.Sprintf("%s template=%s running=%q down=%d stuck=%v", s.name, s.template, s.running, s.down, s.stuck))
	}
	return out
}

func templatesOf(c *simCluster) []string {
	var out []string
	for _, s := range c.servers {
		out = append(out, s.template)
	}
	return out
}

// checkTick checks the invariants of one decision against the model's truth.
func checkTick(t *testing.T, c *simCluster, in Input, d Decision, where func() string) {
	t.Helper()
	if d.Step != nil && d.Hold != nil {
		t.Fatalf("both a step and a hold\n%s", where())
	}
	// Deterministic.
	if again := Plan(in); !reflect.DeepEqual(again, d) {
		t.Fatalf("Plan twice on the same input differs:\n%s\n%s", toJSON(again), where())
	}
	// An operator restart changes nothing: status.rollout rebuilt from what
	// the API server stores gives the same decision, and a controller that
	// lost status altogether takes the same step.
	rebuilt := in
	if in.Previous != nil {
		b, _ := json.Marshal(in.Previous)
		rebuilt.Previous = &clusterv1beta1.RolloutStatus{}
		_ = json.Unmarshal(b, rebuilt.Previous)
	}
	if again := Plan(rebuilt); !reflect.DeepEqual(again, d) {
		t.Fatalf("rebuilding status.rollout changes the decision:\n%s\n%s", toJSON(again), where())
	}
	lost := in
	lost.Previous = nil
	if again := Plan(lost); !reflect.DeepEqual(again.Step, d.Step) || !reflect.DeepEqual(again.ClearAnnotations, d.ClearAnnotations) {
		t.Fatalf("without status.rollout the step differs:\n%s\n%s", toJSON(again), where())
	}
	// Held transitions.
	if d.Hold != nil && (d.Hold.Reason == clusterv1beta1.ReasonAuthChangeBlocked || d.Hold.Reason == clusterv1beta1.ReasonUnsupportedChange) {
		if d.Rollout == nil || len(d.Rollout.Pending) != len(c.servers) {
			t.Fatalf("a held transition does not list every server pending\n%s", where())
		}
	}
	if d.Step == nil {
		return
	}
	// A split never rolls one server at a time.
	splits, resets := false, false
	for _, s := range c.servers {
		if s.template == c.target {
			continue
		}
		for _, ch := range Classify(s.given, c.targetFacts) {
			splits = splits || effects[ch.Kind].Splits
			resets = resets || effects[ch.Kind].ResetsJetStream
		}
	}
	if splits && d.Step.Kind != RestartAll {
		t.Fatalf("a split transition stepped one server\n%s", where())
	}
	if d.Step.Kind == RestartAll {
		if _, ok := c.annotations[clusterv1beta1.AnnotationRestartAll]; !ok {
			t.Fatalf("restart-all without the annotation\n%s", where())
		}
		if resets && len(c.streams) > 0 && c.annotations[clusterv1beta1.AnnotationRestartAll] != clusterv1beta1.RestartAllResetJetStream {
			t.Fatalf("streams left behind without reset-jetstream\n%s", where())
		}
		return
	}
	// No restart of one server, through an open or a closed gate, leaves a
	// Raft group that has a majority of current members without one, unless
	// force-step or acceptQuorumLoss accepts it (and the step says so).
	if d.Step.Kind == RestartOne {
		name := d.Step.Servers[0]
		groups := append([]simGroup{{MetaGroup, c.metaMembers()}}, c.groups...)
		for _, g := range groups {
			if len(g.members) < 2 || !slices.Contains(g.members, name) {
				continue
			}
			cur := c.currentOf(g.members)
			left := len(cur)
			if slices.Contains(cur, name) {
				left--
			}
			quorum := len(g.members)/2 + 1
			if len(cur) >= quorum && left < quorum {
				accepted := d.Step.Forced || in.AcceptQuorumLoss
				if !accepted {
					t.Fatalf("restarting %s leaves %s without a majority (%d of %d current left), not accepted\n%s", name, g.name, left, len(g.members), where())
				}
				// (A step forced while nothing is observed cannot name them.)
				if in.Observation.Observed && !slices.ContainsFunc(d.Step.QuorumLoss, func(q string) bool { return q == g.name || strings.HasSuffix(q, "/"+g.name) }) {
					t.Fatalf("restarting %s leaves %s without a majority, accepted, but the step does not say so (%v)\n%s", name, g.name, d.Step.QuorumLoss, where())
				}
			}
		}
	}
	if d.Step.Forced {
		if c.annotations[clusterv1beta1.AnnotationForceStep] != d.Step.Servers[0] {
			t.Fatalf("a forced step without force-step naming it\n%s", where())
		}
		return
	}
	// A down server is stepped through a closed gate only when it is down
	// in the model's truth (not Ready) and current in no group, so the step
	// lowers nothing (stuck.go).
	if d.Step.Down {
		s := c.server(d.Step.Servers[0])
		if (s.down == 0 && !s.stuck && !s.podGone) || s.current() {
			t.Fatalf("stepped %s as down, but it is Ready or current\n%s", s.name, where())
		}
		if c.paused {
			t.Fatalf("stepped a down server while paused\n%s", where())
		}
		return
	}
	// No step while the gate is closed.
	if c.obsFault || !c.settled() || c.paused {
		t.Fatalf("stepped while observation failed, unsettled or paused\n%s", where())
	}
	for _, s := range c.servers {
		if s.down > 0 || s.stuck || s.podGone {
			t.Fatalf("stepped while %s is not Ready\n%s", s.name, where())
		}
		if s.template == c.target && s.running != c.target {
			t.Fatalf("stepped while %s does not report the target\n%s", s.name, where())
		}
	}
	// The meta leader goes last.
	if d.Step.Servers[0] == c.leader {
		for _, s := range c.servers {
			if s.name != c.leader && s.template != c.target {
				t.Fatalf("stepped the meta leader %s before %s\n%s", c.leader, s.name, where())
			}
		}
	}
}

// checkAfterApply: at most one server is down because of a one-at-a-time step.
func checkAfterApply(t *testing.T, c *simCluster, where func() string) {
	t.Helper()
	down := 0
	for _, s := range c.servers {
		if s.down > 0 && s.byStep && !s.byBulk {
			down++
		}
	}
	bulk := slices.ContainsFunc(c.servers, func(s *simServer) bool { return s.down > 0 && s.byBulk })
	if down > 1 && !bulk {
		t.Fatalf("%d servers down because of steps\n%s", down, where())
	}
}
