// Package rollout is the pure planner of nats-operator: given what should run
// (the target revision and its config facts) and what runs (each server's
// StatefulSet, pod and own report, the observed NATS cluster, the previous
// status.rollout, the annotations and now), Plan decides the one next step, or
// holds and says why.
//
// The package imports only pkg/apis, k8s.io/api, k8s.io/apimachinery and the
// standard library. It never logs, never reads the clock (time comes in as
// Input.Now), and sorts every map before deciding anything, so the same Input
// always gives the same Decision: a restarted or newly elected controller
// decides exactly what its predecessor would have.
//
// Files:
//   - plan.go: Plan and its state diagram.
//   - changes.go: ConfigFacts, the change kinds and which of them split a
//     cluster or reset JetStream (established by matrix_test.go against real
//     nats-server processes).
//   - gate.go: the ordered gate checks before each step.
//   - messages.go: the text of Progressing messages.
package rollout
