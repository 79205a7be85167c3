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
// # Filling the Input (the controller's side)
//
//   - Cluster: the NatsCluster's name. TargetRevision: pkg/render's revision.
//     Target: the facts of the rendered config (version, cluster name, the
//     NATS operator's and system account's public keys from the trust, the
//     accountTrustRefs' keys, JetStream on/domain/limits, server tags).
//   - ConvergedRevision: status.config.revision ("" until the cluster first
//     converged).
//   - Servers: one ServerState per server of the spec: TemplateRevision from
//     the StatefulSet's pod template annotation
//     cluster.nats-operator.io/config-revision ("" when the StatefulSet does
//     not exist); PodExists/PodReady from the pod; Answered and
//     ReportedRevision from the server's own report (/varz
//     server_metadata.config_revision); Running: the facts of the config in
//     the server's ConfigMap (it changes only at the server's own step).
//   - Observation: from pkg/observe's Snapshot: Observed (a Snapshot exists),
//     Settled (the verdict that becomes the Settled condition), MetaLeader,
//     MetaMembers, Streams (every stream in every account; $G for the global
//     account).
//   - Previous: status.rollout as stored; Annotations: the NatsCluster's;
//     Paused: spec.rollout.paused; Now: the sync's time.
//
// # Acting on the Decision
//
//   - Step RestartOne: update that server's ConfigMap and StatefulSet to the
//     target and restart its pod; Event ServerRestarted. Step RestartAll:
//     the same for every server together; Event ServersRestarted, and when
//     ResetJetStream, Event JetStreamReset naming StreamsLeftBehind. Then
//     return: one step per sync.
//   - Hold: touch no server. Its Reason and Message are the Progressing
//     condition's; emit an Event only when the hold's reason changes.
//   - ClearAnnotations: remove these one-shot annotations (after the step is
//     applied, if there is one).
//   - Rollout: write to status.rollout (nil clears it). Progressing: set it
//     with observedGeneration and lastTransitionTime. When Progressing is
//     UpToDate, set status.config.revision to TargetRevision.
//
// Files:
//   - plan.go: Plan and its state diagram.
//   - changes.go: ConfigFacts, the change kinds and which of them split a
//     cluster or reset JetStream (established by matrix_test.go against real
//     nats-server processes).
//   - gate.go: the ordered gate checks before each step.
//   - messages.go: the text of Progressing messages.
//   - types.go: Input and Decision.
package rollout
