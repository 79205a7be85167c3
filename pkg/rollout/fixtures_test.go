package rollout

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Fixture builders for the planner's tests (cert-manager style functional
// options). cluster(3) is demo-0..demo-2 all on revision "old", Ready, settled,
// demo-0 the JetStream meta leader, no auth, with a spec at revision "new"
// that changes nothing that splits.

const (
	oldRev = "old"
	newRev = "new"
)

var t0 = metav1.NewTime(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))

const (
	opA  = "OAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	opB  = "OBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	sysA = "ASYSAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	sysB = "ASYSBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	appA = "AAPPAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
)

func baseFacts() ConfigFacts {
	return ConfigFacts{Version: "2.15.2", ClusterName: "demo", JetStream: true, MaxMemoryStore: 1 << 30, MaxFileStore: 10 << 30}
}

func authFacts(op, sys string) ConfigFacts {
	f := baseFacts()
	f.Operator, f.SystemAccount = op, sys
	return f
}

type opt func(*Input)

func cluster(n int, opts ...opt) Input {
	in := Input{
		Cluster:           "demo",
		TargetRevision:    newRev,
		Target:            baseFacts(),
		ConvergedRevision: oldRev,
		Observation: Observation{
			Observed:   true,
			Settled:    Verdict{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonAllGroupsCurrent, Message: "every Raft group has a leader and every member is current"},
			MetaLeader: "demo-0",
		},
		Now: t0,
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("demo-%d", i)
		in.Servers = append(in.Servers, ServerState{
			Name: name, Ordinal: i, Created: true, ConfigRevision: oldRev, RestartRevision: oldRev, PodExists: true, PodReady: true,
			Answered: true, ReportedRevision: oldRev, Running: baseFacts(),
		})
		in.Observation.MetaMembers = append(in.Observation.MetaMembers, name)
	}
	for _, o := range opts {
		o(&in)
	}
	return in
}

// objectsAt puts a server's ConfigMap and pod template at a config revision
// ("" for a server not created yet); its template revision stays the target's.
func objectsAt(s *ServerState, rev string) {
	s.Created, s.ConfigRevision, s.RestartRevision = rev != "", rev, rev
}

func server(in *Input, name string) *ServerState {
	for i := range in.Servers {
		if in.Servers[i].Name == name {
			return &in.Servers[i]
		}
	}
	panic("no server " + name)
}

// target changes the target facts.
func target(f func(*ConfigFacts)) opt { return func(in *Input) { f(&in.Target) } }

// running changes every server's running facts.
func running(f func(*ConfigFacts)) opt {
	return func(in *Input) {
		for i := range in.Servers {
			f(&in.Servers[i].Running)
		}
	}
}

// stepped puts servers on the target: template, report and running facts.
func stepped(names ...string) opt {
	return func(in *Input) {
		for _, n := range names {
			s := server(in, n)
			objectsAt(s, newRev)
			s.ReportedRevision, s.Running = newRev, in.Target
		}
	}
}

// restarting: the server was stepped and its new pod is not Ready yet.
func restarting(name string) opt {
	return func(in *Input) {
		s := server(in, name)
		objectsAt(s, newRev)
		s.PodReady, s.Answered, s.ReportedRevision, s.Running = false, false, "", in.Target
		in.Observation.Settled = Verdict{Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonServersSilent, Message: name + " did not answer"}
	}
}

// podBehind: the server's pod still runs, started from the template before
// the one its StatefulSet has now (a step cut short before the deletion).
func podBehind(name string) opt {
	return func(in *Input) { server(in, name).PodBehindTemplate = true }
}

func notReady(name string) opt {
	return func(in *Input) { server(in, name).PodReady = false }
}

func reports(name, rev string) opt {
	return func(in *Input) { server(in, name).ReportedRevision = rev }
}

func unsettled(reason, msg string) opt {
	return func(in *Input) {
		in.Observation.Settled = Verdict{Status: metav1.ConditionFalse, Reason: reason, Message: msg}
	}
}

func unobserved(msg string) opt {
	return func(in *Input) {
		in.Observation = Observation{Settled: Verdict{Status: metav1.ConditionUnknown, Reason: clusterv1beta1.ReasonObservationFailed, Message: msg}}
	}
}

func leader(name string) opt { return func(in *Input) { in.Observation.MetaLeader = name } }

func metaMembers(names ...string) opt {
	return func(in *Input) { in.Observation.MetaMembers = names }
}

func streams(refs ...StreamRef) opt {
	return func(in *Input) { in.Observation.Streams = append(in.Observation.Streams, refs...) }
}

func annotate(k, v string) opt {
	return func(in *Input) {
		if in.Annotations == nil {
			in.Annotations = map[string]string{}
		}
		in.Annotations[k] = v
	}
}

func paused() opt { return func(in *Input) { in.Paused = true } }

func at(d time.Duration) opt { return func(in *Input) { in.Now = metav1.NewTime(t0.Add(d)) } }

func previous(st *clusterv1beta1.RolloutStatus) opt { return func(in *Input) { in.Previous = st } }

func converged(rev string) opt { return func(in *Input) { in.ConvergedRevision = rev } }

// creating: no StatefulSet exists yet and the cluster never converged.
func creating() opt {
	return func(in *Input) {
		in.ConvergedRevision = ""
		in.Observation = Observation{Settled: Verdict{Status: metav1.ConditionUnknown, Reason: clusterv1beta1.ReasonObservationFailed, Message: "no server answered"}}
		for i := range in.Servers {
			in.Servers[i] = ServerState{Name: in.Servers[i].Name, Ordinal: in.Servers[i].Ordinal}
		}
	}
}

func gate(waitingFor string, since metav1.Time) *clusterv1beta1.Gate {
	return &clusterv1beta1.Gate{WaitingFor: waitingFor, Since: &since}
}

func ts(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

func toJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}
