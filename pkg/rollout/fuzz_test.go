package rollout

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// byteReader turns fuzz bytes into choices; it returns zeros once exhausted.
type byteReader struct {
	b []byte
	i int
}

func (r *byteReader) next() byte {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return r.b[r.i-1]
}
func (r *byteReader) bool() bool { return r.next()&1 == 1 }
func (r *byteReader) pick(options ...string) string {
	return options[int(r.next())%len(options)]
}

// fuzzInput builds an arbitrary Input, including nonsense the controller
// never sends: duplicate names, empty revisions, unknown annotations.
func fuzzInput(data []byte) Input {
	r := &byteReader{b: data}
	revs := []string{"", oldRev, newRev, "mid"}
	facts := func() ConfigFacts {
		f := baseFacts()
		if r.bool() {
			f.Operator, f.SystemAccount = r.pick(opA, opB), r.pick(sysA, sysB)
		}
		f.ClusterName = r.pick("demo", "demo", "other")
		f.Version = r.pick("2.15.2", "2.15.1")
		f.JetStream = r.next()%4 != 0
		f.JetStreamDomain = r.pick("", "", "hub")
		if r.bool() {
			f.ServerTags = []string{"az:" + r.pick("1", "2")}
		}
		if r.bool() {
			f.Accounts = []string{appA}
		}
		return f
	}
	in := Input{
		Cluster:           "demo",
		TargetRevision:    r.pick(newRev, newRev, newRev, ""),
		Target:            facts(),
		ConvergedRevision: r.pick(revs...),
		Paused:            r.next()%5 == 0,
		Now:               metav1.NewTime(t0.Add(time.Duration(r.next()) * time.Minute)),
	}
	n := int(r.next() % 8)
	for i := 0; i < n; i++ {
		ord := i
		if r.next()%10 == 0 {
			ord = int(r.next() % 4) // duplicates and gaps
		}
		s := ServerState{
			Name: fmt.Sprintf("demo-%d", ord), Ordinal: ord,
			PodExists: r.next()%4 != 0, PodReady: r.next()%3 != 0,
			Answered: r.next()%4 != 0, ReportedRevision: r.pick(revs...), Running: facts(),
		}
		objectsAt(&s, r.pick(revs...))
		s.ClaimTemplateDiffers = r.next()%16 == 0
		in.Servers = append(in.Servers, s)
	}
	switch r.next() % 16 {
	case 0:
		in.Blocked = &Blocked{Reason: clusterv1beta1.ReasonInvalidSpec, Message: "invalid"}
	case 1:
		in.ExtraServers = []ServerState{{Name: "demo-9", Ordinal: 9, Created: true, Stopped: r.next()%2 == 0, PodExists: r.next()%2 == 0}}
	}
	// Independent of Blocked and ExtraServers: a cluster being deleted may be
	// either.
	in.Deleting = r.next()%8 == 0
	in.Observation.Observed = r.next()%4 != 0
	in.Observation.Settled.Status = metav1.ConditionStatus(r.pick("True", "True", "False", "Unknown", ""))
	in.Observation.Settled.Message = r.pick("", "x is catching up")
	in.Observation.MetaLeader = fmt.Sprintf("demo-%d", r.next()%8)
	for i := 0; i < n; i++ {
		if r.next()%5 != 0 {
			in.Observation.MetaMembers = append(in.Observation.MetaMembers, fmt.Sprintf("demo-%d", i))
		}
	}
	for _, m := range in.Observation.MetaMembers {
		if r.next()%4 != 0 {
			in.Observation.MetaCurrent = append(in.Observation.MetaCurrent, m)
		}
	}
	for i := int(r.next() % 3); i > 0; i-- {
		a := Asset{Account: GlobalAccount, Name: fmt.Sprintf("A%d", i)}
		for j := int(r.next()%3) + 1; j > 0; j-- {
			m := fmt.Sprintf("demo-%d", r.next()%8)
			a.Members = append(a.Members, m)
			if r.next()%4 != 0 {
				a.Current = append(a.Current, m)
			}
		}
		in.Observation.Assets = append(in.Observation.Assets, a)
	}
	in.AcceptQuorumLoss = r.next()%6 == 0
	for i := int(r.next() % 9); i > 0; i-- {
		in.Observation.Streams = append(in.Observation.Streams, StreamRef{Account: r.pick(GlobalAccount, appA), Name: fmt.Sprintf("S%d", r.next()%4)})
	}
	if r.bool() {
		in.Previous = &clusterv1beta1.RolloutStatus{TargetRevision: r.pick(revs...), Current: fmt.Sprintf("demo-%d", r.next()%8)}
		if r.bool() {
			since := metav1.NewTime(t0.Add(time.Duration(int(r.next())-128) * time.Minute))
			in.Previous.Gate = &clusterv1beta1.Gate{WaitingFor: r.pick(clusterv1beta1.GateSettled, clusterv1beta1.GatePodsReady, ""), Since: &since}
		}
	}
	if r.bool() {
		in.Annotations = map[string]string{}
		for i := int(r.next() % 3); i >= 0; i-- {
			switch r.next() % 4 {
			case 3:
				in.Annotations[clusterv1beta1.AnnotationForceDelete] = r.pick("", "true")
			case 0:
				in.Annotations[clusterv1beta1.AnnotationRestartAll] = r.pick("", "true", "reset-jetstream", " reset-jetstream ")
			case 1:
				in.Annotations[clusterv1beta1.AnnotationForceStep] = fmt.Sprintf("demo-%d", r.next()%9)
			default:
				in.Annotations["example.com/other"] = "x"
			}
		}
	}
	return in
}

// FuzzPlan: Plan never panics, never returns both a step and a hold, is
// deterministic, and every decision names a Progressing reason.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte("seed: adding auth to a running cluster"))
	f.Add([]byte{255, 0, 255, 0, 3, 3, 3, 3, 1, 1, 1, 1, 7, 7, 7, 7, 2, 2, 2, 2, 9, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInput(data)
		d := Plan(in)
		if d.Step != nil && d.Hold != nil {
			t.Fatalf("both a step and a hold: %s", toJSON(d))
		}
		if d.Progressing.Reason == "" || d.Progressing.Type != clusterv1beta1.ConditionProgressing {
			t.Fatalf("no Progressing reason: %s", toJSON(d))
		}
		if d.Step != nil {
			payload := map[StepKind]bool{RestartOne: len(d.Step.Servers) == 1, RestartAll: len(d.Step.Servers) > 0,
				Reload: d.Step.Reload != nil, RemoveServer: d.Step.Remove != nil, ExpandClaim: d.Step.Expand != nil}
			if !payload[d.Step.Kind] {
				t.Fatalf("a %s step without its payload: %s", d.Step.Kind, toJSON(d))
			}
		}
		// The controller emits Events from Hold.Notify, and for the end of a
		// hold from Notifies of the reason in status: they must agree. A
		// released finalizer writes no status: the NatsCluster goes.
		if !d.ReleaseFinalizer && (d.Hold != nil && d.Hold.Notify) != Notifies(d.Progressing.Reason) {
			t.Fatalf("hold notify and Notifies(%s) disagree: %s", d.Progressing.Reason, toJSON(d))
		}
		if in.Deleting && (d.Step != nil || len(d.Create) > 0 || len(d.ClearAnnotations) > 0) {
			t.Fatalf("a cluster being deleted stepped, created or cleared annotations: %s", toJSON(d))
		}
		if d.ReleaseFinalizer != (in.Deleting && d.Hold == nil) {
			t.Fatalf("the finalizer is released other than for a deletion that does not hold: %s", toJSON(d))
		}
		if in.Blocked != nil && !in.Deleting && (d.Step != nil || len(d.Create) > 0) {
			t.Fatalf("a blocked cluster stepped or created: %s", toJSON(d))
		}
		if len(in.ExtraServers) > 0 && in.Blocked == nil && !in.Deleting && (len(d.Create) > 0 || (d.Step != nil && (d.Step.Kind != RemoveServer || d.Step.Remove.Server != "demo-9"))) {
			t.Fatalf("a scale-down took another step than removing demo-9, or created: %s", toJSON(d))
		}
		// A restart that leaves a Raft group with a majority without one is
		// forced or accepted, and says which groups.
		if d.Step != nil && d.Step.Kind == RestartOne {
			for _, g := range replicatedGroups(in.Observation) {
				if g.lostBy(d.Step.Servers[0]) && (!(d.Step.Forced || in.AcceptQuorumLoss) || !slices.Contains(d.Step.QuorumLoss, g.Group)) {
					t.Fatalf("restarting %s stops %s, not accepted or not said: %s", d.Step.Servers[0], g.Group, toJSON(d))
				}
			}
		}
		if again := Plan(in); !reflect.DeepEqual(again, d) {
			t.Fatalf("Plan is not deterministic:\n%s\nvs\n%s", toJSON(d), toJSON(again))
		}
	})
}
