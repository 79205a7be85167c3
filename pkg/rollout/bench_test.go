package rollout

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// benchInput is 7 servers whose JetStream holds 1,000 Raft groups (streams,
// across accounts): the planner sees the groups as the streams it may leave
// behind, the Settled verdict having been computed over them by pkg/observe.
func benchInput(opts ...opt) Input {
	in := cluster(7, opts...)
	for i := 0; i < 1000; i++ {
		acct := GlobalAccount
		if i%2 == 1 {
			acct = appA
		}
		in.Observation.Streams = append(in.Observation.Streams, StreamRef{Account: acct, Name: fmt.Sprintf("STREAM-%04d", i)})
	}
	return in
}

func BenchmarkPlan(b *testing.B) {
	cases := map[string]Input{
		"7 servers 1000 groups rolling": benchInput(stepped("demo-6", "demo-5"), previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-5"})),
		"7 servers 1000 groups gate closed": benchInput(unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "x"), at(20*60*1e9),
			previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Gate: gate(clusterv1beta1.GateSettled, t0)})),
		"7 servers 1000 groups auth change held": benchInput(addAuth),
	}
	for _, name := range []string{"7 servers 1000 groups rolling", "7 servers 1000 groups gate closed", "7 servers 1000 groups auth change held"} {
		in := cases[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			var d Decision
			for b.Loop() {
				d = Plan(in)
			}
			if d.Progressing.Status == metav1.ConditionUnknown {
				b.Fatal("unexpected")
			}
		})
	}
}
