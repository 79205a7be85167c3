// Package controller is the NatsCluster controller: shared informers feed a
// named, rate-limited workqueue, and each sync runs in three phases (see
// gather.go):
//
//   - decide: gather every object of the cluster from the listers (the only
//     reads of a sync; StatefulSets beyond spec.replicas included), render the
//     target with pkg/render (which also reads the servers' nats.conf back:
//     this package never parses it), observe the NATS servers with
//     pkg/observe, and ask pkg/rollout's planner for a Decision;
//   - write: the Services and PDB, then only what the Decision allows: the
//     servers it creates, its one step (executed by kind), the one-shot
//     annotations it clears;
//   - report: status, Events and metrics, always from the Decision (a write
//     the API server refused is reported as ReconcileFailed with its words).
//
// The planner decides every hold and step; this package executes and
// reports. It is the only package that writes to Kubernetes. The structure
// follows k8s.io/sample-controller, with the Kubernetes StatefulSet
// controller's care: owners resolved by Kind and UID, an object the
// controller does not control is reported (ReconcileFailed), never
// overwritten, and nothing is written when nothing differs.
//
// Revisions: each server's ConfigMap carries the config revision (in
// nats.conf), its pod template the template revision and the config revision
// the pod was last restarted for; a restart step writes the ConfigMap, then
// the template, then deletes a pod still on another revision. An operator
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
// Steps by kind: restarts (step.go, servers.go); Reload steps over $SYS
// with spec.auth.systemCredentials or the controller's own system user, whose
// Secret it generates (reload.go, systemuser.go); RemoveServer steps of a
// scale-down (scaledown.go). Each records its progress in the cluster's
// objects (annotations, the StatefulSet's replicas), never in memory, so a
// restarted controller goes on where its predecessor was.
package controller
