package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

const errImagePull = "ErrImagePull: nats:2.15.99: not found"

// healthyGroups: the meta group and an R3 stream ORDERS with every member
// current, led by demo-0.
func healthyGroups(in *Input) {
	in.Observation.MetaCurrent = slices.Clone(in.Observation.MetaMembers)
	in.Observation.Assets = append(in.Observation.Assets, Asset{
		Account: GlobalAccount, Name: "ORDERS", Leader: "demo-0",
		Members: slices.Clone(in.Observation.MetaMembers), Current: slices.Clone(in.Observation.MetaMembers),
	})
}

// stuck: the server's pod is not Ready, it does not answer, and no group
// counts it as current; its container cannot start.
func stuck(name string) opt {
	return func(in *Input) {
		s := server(in, name)
		s.PodReady, s.Answered, s.ReportedRevision, s.StartProblem = false, false, "", errImagePull
		in.Observation.MetaCurrent = slices.DeleteFunc(in.Observation.MetaCurrent, func(m string) bool { return m == name })
		for i := range in.Observation.Assets {
			a := &in.Observation.Assets[i]
			a.Current = slices.DeleteFunc(a.Current, func(m string) bool { return m == name })
		}
		in.Observation.Settled = Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonServersSilent, Message: "1 of 3 servers did not answer: " + name}
	}
}

// reverted: the spec went back to the converged revision (newRev here);
// demo-0 and demo-1 never left it, demo-2 runs the bad revision.
func reverted(in *Input) {
	in.ConvergedRevision = newRev
	stepped("demo-0", "demo-1")(in)
	s := server(in, "demo-2")
	objectsAt(s, "bad")
	s.Running.Version = "2.15.99"
}

func TestPlanStepsAServerThatIsDownWhenTheRestIsSettled(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want want
	}{
		{
			name: "a server stuck on a bad version, then reverted, is restarted though the cluster is not Settled, counted 1 of 1",
			in:   cluster(3, healthyGroups, reverted, stuck("demo-2"), previous(&clusterv1beta1.RolloutStatus{TargetRevision: "bad", Current: "demo-2", Pending: []string{"demo-1", "demo-0"}})),
			want: want{
				step:   &Step{Kind: RestartOne, Servers: []string{"demo-2"}, Down: true},
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-2 (1 of 1), which is down (its pod is not Ready and it does not answer; " + errImagePull +
					"): restarting it cannot lower availability, and the rest of the cluster is settled without it",
				anyRollout: true, changes: []ChangeKind{ChangeVersion},
			},
		},
		{
			name: "after the revert's step the cluster waits for the gate before it is up to date, still counted 1 of 1",
			in: cluster(3, healthyGroups, reverted, restarting("demo-2"), stepped("demo-2"), func(in *Input) {
				s := server(in, "demo-2")
				s.PodReady, s.Answered, s.ReportedRevision = false, false, ""
			}, previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-2"})),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-2 (1 of 1); waiting for Settled", anyRollout: true,
			},
		},
		{
			name: "a server stuck on the target waits, the others untouched, and the message says why it cannot start",
			in: cluster(3, healthyGroups, func(in *Input) { in.Target.Version = "2.15.99" }, stepped("demo-2"), stuck("demo-2"),
				previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-2", Pending: []string{"demo-1", "demo-0"}})),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart,
				message: "restarting demo-2 (1 of 3); waiting for Settled; demo-2 cannot start 2.15.99: " + errImagePull +
					"; revert spec.version or fix the image (spec.image)",
				anyRollout: true, changes: []ChangeKind{ChangeVersion},
			},
		},
		{
			name: "a meta leader whose pod is not Ready but which still leads is not stepped past the gate",
			in: cluster(3, healthyGroups, leader("demo-2"), notReady("demo-2"),
				unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "catching up")),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "two servers down must wait: without them there is no quorum",
			in:   cluster(3, healthyGroups, stuck("demo-2"), stuck("demo-1")),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "a down server is not restarted while another member of its stream lags",
			in: cluster(3, healthyGroups, stuck("demo-2"), func(in *Input) {
				in.Observation.Assets[0].Current = []string{"demo-0"}
			}),
			want: want{
				holdReason: clusterv1beta1.ReasonRollingRestart, waitingFor: clusterv1beta1.GateSettled,
				status: metav1.ConditionTrue, reason: clusterv1beta1.ReasonRollingRestart, anyRollout: true,
			},
		},
		{
			name: "a down server whose JetStream store is ephemeral and holds an R1 stream still holds with DataLossOnRestart",
			in: cluster(3, healthyGroups, stuck("demo-2"), ephemeral, func(in *Input) {
				// An R1 stream on demo-2 with no leader while it is down.
				in.Observation.Assets = append(in.Observation.Assets, Asset{Account: GlobalAccount, Name: "ONE", Members: []string{"demo-2"}})
			}),
			want: want{
				holdReason: clusterv1beta1.ReasonDataLossOnRestart, waitingFor: forceStepKey + "=demo-2",
				status: metav1.ConditionFalse, reason: clusterv1beta1.ReasonDataLossOnRestart, anyRollout: true,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkDecision(t, tableCase(t, tc.in), tc.want)
		})
	}
}

// TestNoStepPastAClosedGateLowersAGroupBelowQuorum generates clusters with
// servers down, lagging or offline in random groups, and checks every step
// the planner takes through a closed gate (not forced): the server it
// restarts is current in no group, and every group keeps a quorum of
// current members without it.
func TestNoStepPastAClosedGateLowersAGroupBelowQuorum(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 1))
	steps := 0
	for run := range 20000 {
		n := 1 + rng.IntN(5)
		in := cluster(n)
		in.Observation.Settled = Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonServersSilent, Message: "x"}
		all := slices.Clone(in.Observation.MetaMembers)
		for i := range in.Servers {
			s := &in.Servers[i]
			if rng.IntN(3) == 0 {
				s.PodReady = false
			}
			if rng.IntN(3) == 0 {
				s.Answered = false
			}
		}
		pickSome := func() []string {
			var out []string
			for _, m := range all {
				if rng.IntN(4) != 0 {
					out = append(out, m)
				}
			}
			return out
		}
		in.Observation.MetaCurrent = pickSome()
		if rng.IntN(5) == 0 {
			in.Observation.MetaLeader = ""
		} else {
			in.Observation.MetaLeader = all[rng.IntN(len(all))]
		}
		for g := range rng.IntN(4) {
			members := pickSome()
			if len(members) == 0 {
				continue
			}
			a := Asset{Account: GlobalAccount, Name: fmt.Sprintf("S%d", g), Members: members}
			for _, m := range members {
				if rng.IntN(3) != 0 {
					a.Current = append(a.Current, m)
				}
			}
			if len(a.Current) > 0 && rng.IntN(4) != 0 {
				a.Leader = a.Current[0]
			}
			in.Observation.Assets = append(in.Observation.Assets, a)
		}
		d := Plan(in)
		if d.Step == nil || d.Step.Forced || d.Step.Kind != RestartOne {
			continue
		}
		steps++
		x := d.Step.Servers[0]
		groups := append([]Asset{{Name: "meta", Leader: in.Observation.MetaLeader, Members: all, Current: in.Observation.MetaCurrent}}, in.Observation.Assets...)
		for _, g := range groups {
			if slices.Contains(g.Current, x) || g.Leader == x {
				t.Fatalf("run %d: stepped %s, current in %s: %s", run, x, g.Name, toJSON(in))
			}
			if g.Name == "meta" {
				current := 0
				for _, m := range g.Current {
					if m != x && slices.Contains(g.Members, m) {
						current++
					}
				}
				// A single server down is the whole meta group: restarting
				// it cannot lower anything.
				if current <= len(g.Members)/2 && len(in.Servers) > 1 {
					t.Fatalf("run %d: stepping %s leaves the meta group %d current of %d: %s", run, x, current, len(g.Members), toJSON(in))
				}
			}
		}
	}
	t.Logf("20000 generated clusters with servers down: %d steps through a closed gate, none lowering a group below quorum", steps)
	if steps == 0 {
		t.Fatal("the generator never produced a down server the planner could step: it tests nothing")
	}
}

// A single server stuck on a version that cannot start, then reverted, is
// restarted though nothing is Settled (with or without JetStream: there is
// no other server to keep up); so is one of three servers without
// JetStream (no meta group to wait for), while the other two answer.
func TestAStuckServerWithNothingElseToKeepUpIsRestarted(t *testing.T) {
	revertedOne := func(in *Input) {
		in.ConvergedRevision = newRev
		s := server(in, "demo-0")
		objectsAt(s, "bad")
		s.Running.Version = "2.15.99"
	}
	revertedLast := func(in *Input) {
		in.ConvergedRevision = newRev
		stepped("demo-0", "demo-1")(in)
		s := server(in, "demo-2")
		objectsAt(s, "bad")
		s.Running.Version = "2.15.99"
	}
	silentMeta := func(in *Input) {
		in.Observation.MetaLeader, in.Observation.MetaMembers, in.Observation.MetaCurrent = "", nil, nil
	}
	for _, tc := range []struct {
		name string
		in   Input
	}{
		{"one server without JetStream", cluster(1, noJetStream, silentMeta, revertedOne, stuck("demo-0"))},
		{"one JetStream server", cluster(1, silentMeta, revertedOne, stuck("demo-0"))},
		{"three servers without JetStream", cluster(3, noJetStream, silentMeta, revertedLast, stuck("demo-2"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Plan(tc.in)
			t.Logf("Progressing %s %s: %s", d.Progressing.Status, d.Progressing.Reason, d.Progressing.Message)
			want := tc.in.Servers[len(tc.in.Servers)-1].Name
			if d.Step == nil || d.Step.Kind != RestartOne || !slices.Equal(d.Step.Servers, []string{want}) {
				t.Fatalf("step %+v, want the restart of %s", d.Step, want)
			}
		})
	}
}
