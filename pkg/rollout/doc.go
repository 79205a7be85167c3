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
//   - Cluster: the NatsCluster's name. TargetRevision: pkg/render's cluster
//     config revision (each server's own goes in its ServerState). Target: render's Facts of the rendered config, converted
//     (rollout.ConfigFacts(f)).
//   - Blocked: set instead of a target when a reference of spec.auth does not
//     resolve, render refuses the trust or the spec (InvalidSpec), or an
//     object is in the way (ReconcileFailed).
//   - ExtraServers: servers beyond spec.replicas that still have a
//     StatefulSet.
//   - ConvergedRevision: status.config.revision ("" until the cluster first
//     converged).
//   - Servers: one ServerState per server of the spec: TargetConfigRevision,
//     the server's own revision render computed; Created when its
//     StatefulSet exists; CreatedFor from its created-for annotation;
//     ConfigRevision from its ConfigMap (render.ReadConfig);
//     RestartRevision from the pod template's config-revision annotation;
//     TemplateRevision (render.TemplateRevisionOf) and TargetTemplateRevision
//     (render's); ClaimTemplateDiffers and ClaimExpansion (the claim
//     against the claim template); PodExists/PodReady from the pod;
//     Answered and ReportedRevision from the server's own report (/varz
//     server_metadata.config_revision); Running: the facts of the config in
//     the server's ConfigMap (it changes only at the server's own step).
//   - Observation: from pkg/observe's Snapshot: Observed (a Snapshot exists),
//     Settled (the verdict that becomes the Settled condition), MetaLeader,
//     MetaMembers, MetaCurrent, Streams (every stream in every account; $G
//     for the global account), Assets (streams and consumers with their
//     current copies).
//   - Previous: status.rollout as stored; Annotations: the NatsCluster's;
//     Paused: spec.rollout.paused; Now: the sync's time. Deleting:
//     metadata.deletionTimestamp is set.
//
// # Acting on the Decision
//
//   - Create: create these servers' ConfigMap and StatefulSet at the target.
//     A scale-up creates the added servers and steps no running server
//     (Progressing ScalingUp until they joined): their configs do not
//     change, since routes list the seed servers only.
//   - Step, by Kind: RestartOne: update that server's ConfigMap, then its
//     StatefulSet, to the target and restart its pod; Event ServerRestarted.
//     RestartAll: the same for every server together; Event
//     ServersRestarted, and when ResetJetStream, Event JetStreamReset naming
//     StreamsLeftBehind. Reload: record the reload Started on the server's
//     StatefulSet, write its ConfigMap, ask the server to reload (or, with
//     Confirmed, record it Done; a refusal is recorded Refused with
//     nats-server's words); Events ServerReloaded, ReloadRefused.
//     RemoveServer: one phase of removing a server beyond spec.replicas, or
//     of replacing one (Remove.Replace): evacuate it, step the meta leader
//     down, scale its StatefulSet to 0, remove its JetStream peer (scale-
//     down only), delete its ConfigMap, claim and StatefulSet; Event
//     ServerRemoval per phase. ExpandClaim: raise the server's claim's
//     storage request to the claim template's. A controller refuses a kind
//     it does not know. One step per sync.
//   - Annotate: set these annotations (the controller's own marks) before
//     creating servers or taking the step.
//   - DeleteClaims (with ReleaseFinalizer): delete the servers' claims
//     before the finalizer goes.
//   - Hold: touch no server. Its Reason and Message are the Progressing
//     condition's; when Notify, emit an Event when the hold starts or changes
//     reason, and when a hold whose reason Notifies ends.
//   - ClearAnnotations: remove these one-shot annotations (after the step is
//     applied, if there is one).
//   - ReleaseFinalizer: remove cluster.nats-operator.io/streams so the
//     deletion goes on; write no status (the NatsCluster goes).
//   - Rollout: write to status.rollout (nil clears it). Progressing: set it
//     with observedGeneration and lastTransitionTime. When Progressing is
//     UpToDate, set status.config to TargetRevision with AppliedBy and
//     RestartReason; while a rollout restarts servers, set
//     status.config.restartReason to Rollout.RestartReason from its first
//     step on. Soon: look again within a second.
//
// Files:
//   - plan.go: Plan and its state diagram.
//   - deletion.go: a NatsCluster being deleted: hold or release the finalizer.
//   - blocked.go: the holds before any server is created or touched.
//   - dataloss.go, stuck.go: restarts that would lose the only copy of a
//     stream (or what a hung server without a volume holds); a down server
//     stepped through a closed gate.
//   - quorum.go: restarts that would leave a Raft group without a majority
//     of current members (QuorumLossOnRestart), and the fault-tolerance
//     figure of status.jetstream.faultTolerance.
//   - changes.go: ConfigFacts, the change kinds and which of them split a
//     cluster or reset JetStream (established by matrix/matrix_test.go
//     against real nats-server processes) or can be applied by a config
//     reload (matrix/reload_matrix_test.go: only the controller's system
//     user; server tags and raised JetStream limits too without auth,
//     ReloadsWithoutAuth; every other kind is refused, unsettled, not in
//     effect, or breaks the account resolver in operator mode).
//   - reload.go: Reload steps, reloads in flight, and the fallback to a
//     restart.
//   - migration.go: restart-all=migrate-jetstream, an auth change that
//     keeps the streams: backup, restart together, restore (its state
//     diagram), and the MigrationBlocked holds.
//   - gate.go: the ordered gate checks before each step.
//   - messages.go: the text of Progressing messages.
//   - types.go: Input and Decision.
//
// The tests here are pure and fast: the table tests (every case recorded in
// testdata/table_cases.json for pkg/kubectlnats to replay), the
// simulation and the fuzz tests. The matrices that establish the effects
// table against real nats-server processes are the package
// pkg/rollout/matrix, which `make test` runs in full only when what they
// prove changed (see its doc.go).
package rollout
