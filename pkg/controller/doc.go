// Package controller is the NatsCluster controller: shared informers feed a
// named, rate-limited workqueue, and each sync runs in phases (gather.go):
//
//   - gather (gather*.go): every object the sync needs, once, through
//     Sources (the listers, and API for the few reads by name: Secret
//     values, claims, StorageClasses, the Certificate, the PodMonitor), into
//     immutable facts. The only code that reads (TestOnlyTheGathererReads);
//     what needs the clock or entropy (a new system user, route TLS made or
//     renewed) is made here too;
//   - observe: the NATS servers the facts name (pkg/observe);
//   - decide (decide.go): a pure function of facts and observation
//     returning one plan: the rendered target (pkg/render), the planner's
//     input and Decision (pkg/rollout), the supporting objects to write
//     (TestDecideIsPure);
//   - write (write.go): the writers, one per kind of supporting object, then
//     only what the Decision allows: the servers it creates, its one step
//     (executed by kind, step.go), the one-shot annotations it clears;
//   - report (sync.go, status.go): status, Events and metrics, always from
//     the plan (a write the API server refused is reported as
//     ReconcileFailed with its words).
//
// The planner decides every hold and step; this package executes and
// reports. It is the only package that writes to Kubernetes. The structure
// follows k8s.io/sample-controller, with the Kubernetes StatefulSet
// controller's care: owners resolved by Kind and UID, an object the
// controller does not control is reported (ReconcileFailed), never
// overwritten, and nothing is written when nothing differs. kubectl nats
// plan (pkg/kubectlnats) runs the same gather and decide (Decide,
// preview.go) on Sources of a live cluster (SourcesFor) or of manifests
// (StaticSources).
//
// Where things go:
//
// A new supporting object (a Secret, a Service, a gateway's Certificate):
//  1. its read: a Sources field (a lister, with its informer in Informers,
//     NewInformerSet and the RBAC of manifests/) or an APIReader method
//     (apiReader, staticAPI), read by a gather function into a facts field
//     (and facts.clone);
//  2. what it should be: rendered by pkg/render into render.Output, or, for
//     a write decided here, a plan field set by decide;
//  3. its writer: a func(ctx, *plan) error in writers() (write.go), with
//     one create/correct/delete shape and writeError for a refusal; marked
//     optional when the servers run without it, so that its failed write
//     is ObjectsWritten=False WriteFailed and never stops a step;
//  4. its events: the informer's handler in New (enqueueOwner when the
//     cluster controls it, enqueueReferrers when the spec names it).
//
// A new step kind:
//  1. pkg/rollout: the StepKind, its payload on Step, in StepKinds, decided
//     by the planner with its Progressing reason and message;
//  2. its executor: a case of executeStep (step.go) in a file of its own,
//     recording its progress in the cluster's objects, never in memory
//     (TestEveryStepKindHasAnExecutor);
//  3. its plan verdict: a case of stepVerdict (pkg/kubectlnats/verdict.go)
//     (TestEveryStepKindHasAPlanVerdict);
//  4. its step metrics come with StepKinds (metrics.go).
//
// A new hold: pkg/rollout alone (the reason in pkg/apis constants.go, the
// hold and its message in the planner, with planner tests; rollout.Notifies
// when it needs the user; the README's "What the controller will never do
// without being told", which TestREADMENamesEveryHold checks). The controller reports it as it reports every
// Decision; a fact the hold needs is gathered (above) and passed in
// rollout.Input by planInput (decide.go).
//
// The last checks before a server stops (step.go's callers in write.go):
// the PodDisruptionBudget, read from the caches then (disruption.go), and, for a
// NatsCluster with spec.gateway, its turn in the supercluster: the Lease
// of its supercluster's members (gather_supercluster.go), taken before the
// first restart and kept while the planner says the rollout takes steps
// (Decision.KeepsTurn), so two members of a supercluster never roll out at
// once and one stuck member stops no other (supercluster.go). Either
// refusing is a wait reported in Progressing, not an error.
//
// Secrets the controller keeps for a cluster and writes before any server
// (tlsSecrets, write.go's first writer): the route TLS CA and certificate
// (gather_tls.go, tls.go), the controller's client CA (gather_tls.go), the
// gateway CA bundle of spec.gateway.tls (gather_gateway.go: its own routes
// CA, each clusterRef remote's, caSecret's; a Secret event in a remote's
// namespace enqueues the clusters naming it), and the copy of the leaf
// remotes' creds files and CAs (gather_leaf.go). Each is projected into the
// config volume, so a new one reaches the server with the config that
// names it. What is copied from a Secret the spec names is checked first
// (secret_contents.go): a creds file must parse as one, of a CA only the
// certificates are kept. A clusterRef to a NatsCluster of another
// namespace is followed only with its consent, its annotation
// allow-references-from (gather_consent.go; its change enqueues the
// clusters naming it).
//
// Revisions: each server's ConfigMap carries the config revision (in
// nats.conf), its pod template the template revision and the config revision
// the pod was last restarted for; a restart step writes the template (the
// StatefulSets are OnDelete, so that restarts nothing, and a refused template
// leaves the ConfigMap alone), then the ConfigMap, then deletes the pod. A pod
// started from an older template than its StatefulSet's (a step cut short
// before the deletion) is reported to the planner (PodBehindTemplate), which
// takes that server's step again. An operator
// upgrade restarts nothing: render keeps the revision running objects carry
// when they equal the target (compat_test.go syncs objects written by the
// previous release).
//
// Deletion (finalizer.go): every NatsCluster carries the finalizer
// cluster.nats-operator.io/streams, added before its first object. While it
// is being deleted, a sync writes nothing but its status until the planner
// releases the finalizer (JetStream holds no streams, or force-delete is
// set); the garbage collector then deletes the servers, and the claims stay.
//
// JetStream migration (restart-all=migrate-jetstream, pkg/rollout's
// migration.go): gather_migration.go reads the NatsBackup and NatsRestore
// the cluster owns for its target revision (labelled migration-of and
// migration-revision) and the account of spec.jetstream.migration's
// credentials; migration.go's StartMigration step creates them. They are
// run by the controller of pkg/controller/backups (same process, own
// queue), whose Jobs move the data; this package never touches a stream.
//
// Steps by kind: restarts (step.go, servers.go); Reload steps over $SYS
// with spec.auth.systemCredentials or the controller's own system user, whose
// Secret it generates (reload.go, systemuser.go); RemoveServer steps of a
// scale-down (scaledown.go); ExpandClaim (claims.go). What a step says to NATS (reload,
// peer removal, evacuation, meta leader step-down) is in pkg/act; pkg/observe
// only reads. Each records its
// progress in the cluster's objects (annotations, the StatefulSet's
// replicas), never in memory, so a restarted controller goes on where its
// predecessor was.
package controller
