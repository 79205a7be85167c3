package rollout

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// GateBlockedAfter is how long a gate may stay closed on one check before the
// Progressing reason turns from RollingRestart to GateBlocked. Nothing ever
// proceeds because of it: it only makes a stuck rollout visible.
const GateBlockedAfter = 10 * time.Minute

// MaxNamedStreams is how many streams a hold message names before it says
// "and N more".
const MaxNamedStreams = 5

// GlobalAccount is the account clients land in on servers without auth.
const GlobalAccount = "$G"

// Input is everything Plan decides from. The controller fills it from the
// NatsCluster, the rendered targets, the StatefulSets and pods of the
// cluster, and the observed Snapshot; see the field comments.
type Input struct {
	// Cluster is the NatsCluster's name, e.g. demo.
	Cluster string

	// JetStreamRemotes are the gateway remotes (by name) that run, or may
	// run, a JetStream meta group of their own: a remote NatsCluster with
	// spec.jetstream, and every remote by URLs (nothing says it does not).
	JetStreamRemotes []string

	// TargetRevision is the cluster's config revision pkg/render computed
	// for the spec (status.rollout.targetRevision, and status.config.revision
	// once converged). Each server's own is in ServerState.
	TargetRevision string

	// Target are the facts of the target config, the same on every server.
	Target ConfigFacts

	// ConvergedRevision is status.config.revision: the revision the cluster
	// last converged to; empty while the cluster was never up to date (it is
	// being created).
	ConvergedRevision string

	// Servers are the servers of the target spec, in any order.
	Servers []ServerState

	// Blocked is set when the target cannot be computed or acted on: a
	// reference of spec.auth that does not resolve, a trust or spec render
	// refuses, an object in the way. The planner holds with its reason and
	// touches no server; Target, TargetRevision and Servers may be empty.
	Blocked *Blocked

	// ExtraServers are servers of the cluster beyond spec.replicas that still
	// have a StatefulSet (a scale-down), in any order: Name, Ordinal,
	// Created, Stopped, PodExists, PodReady and Answered are used.
	ExtraServers []ServerState

	// Observation is what observing the NATS cluster found.
	Observation Observation

	// Previous is status.rollout as last written (nil when absent). Only the
	// gate's since and the sticky current come from it: no step depends on it.
	Previous *clusterv1beta1.RolloutStatus

	// Annotations are the NatsCluster's annotations; Plan reads the one-shot
	// restart-all and force-step annotations, and force-delete while
	// Deleting.
	Annotations map[string]string

	// Deleting says the NatsCluster is being deleted (metadata.
	// deletionTimestamp is set): Plan creates and steps nothing, and says
	// whether the finalizer may go (deletion.go).
	Deleting bool

	// DeleteClaims says the servers' claims go with a deleted NatsCluster
	// (spec.jetstream.volumeClaimTemplate.whenDeleted: Delete).
	DeleteClaims bool

	// Paused is spec.rollout.paused.
	Paused bool

	// AcceptQuorumLoss is spec.rollout.acceptQuorumLoss: a restart that
	// leaves a Raft group without a majority of current members goes
	// without QuorumLossOnRestart (quorum.go).
	AcceptQuorumLoss bool

	// CanReload says the controller can send a server a config reload
	// ($SYS.REQ.SERVER.<id>.RELOAD): it has system credentials
	// (spec.auth.systemCredentials, or its own system user that a running
	// server already runs). NoReload says why not, for restartReason, e.g.
	// "reloads need spec.auth.systemCredentials".
	CanReload bool
	NoReload  string

	// Migration is the JetStream migration toward TargetRevision
	// (restart-all=migrate-jetstream, migration.go): nil without
	// spec.jetstream.migration.
	Migration *Migration

	// ReloadTimeout is how long a reloaded server may take to report its new
	// revision (the kubelet updates a mounted ConfigMap within about a
	// minute) before the reload becomes a restart of that server.
	ReloadTimeout time.Duration

	// Now is the time of this sync.
	Now metav1.Time
}

// ServerState is one server as the cluster shows it.
type ServerState struct {
	// Name is the server name, e.g. demo-2.
	Name string
	// Ordinal is the server's index, 2 for demo-2.
	Ordinal int
	// Created says the server's StatefulSet exists. A server not created yet
	// is created directly at the target (Decision.Create); the revisions
	// below are then empty.
	Created bool
	// OldClaimDeleting says the claim a server not created yet would use
	// is still being deleted (its server was removed or replaced): the
	// server is created once the claim is gone, and until then the
	// Progressing message says it waits.
	OldClaimDeleting bool
	// TargetConfigRevision is the config revision the target renders for
	// this server: each server has its own (a digest of its own config and
	// template), so a server added by a scale-up leaves the others' alone.
	// Empty means TargetRevision.
	TargetConfigRevision string
	// ConfigRevision is the config revision of the server's ConfigMap (its
	// nats.conf's server_metadata.config_revision); empty without one.
	ConfigRevision string
	// RestartRevision is the config revision the server's pod template was
	// last restarted for (its config-revision annotation). A restart step
	// sets it; a config applied without a restart would not.
	RestartRevision string
	// TemplateRevision is the template revision of the server's StatefulSet
	// (its pod template's template-revision annotation), and
	// TargetTemplateRevision the one the target renders for it. They differ
	// when something other than the config changes (resources, image).
	TemplateRevision       string
	TargetTemplateRevision string
	// TemplateChanges name the parts of the pod template that differ from
	// the target ("scheduling", "the nats container", "labels or
	// annotations"), for the restart reason; empty when not known.
	TemplateChanges []string
	// CreatedFor is the cluster revision the server's StatefulSet was created
	// for (its created-for annotation); empty when unknown. A server created
	// for TargetRevision was added by this rollout.
	CreatedFor string
	// ClaimTemplateDiffers says the StatefulSet's volume claim templates
	// differ from the target's in a way its claim cannot take in place
	// (they are immutable): the server is replaced by one with the new
	// claim (replace.go). A larger storage request the storage class can
	// expand is ClaimExpansion instead, and one already expanded is no
	// difference.
	ClaimTemplateDiffers bool
	// ClaimExpansion is set while the server's claim is smaller than the
	// claim template's storage request and its storage class allows
	// expansion: it is grown in place (ExpandClaim), no restart.
	ClaimExpansion *ClaimExpansion
	// Stopped says the server's StatefulSet is scaled to 0: a scale-down
	// stopped it (or a user did).
	Stopped bool
	// PodExists says whether the server's pod exists.
	PodExists bool
	// PodReady says whether the server's pod is Ready.
	PodReady bool
	// PodBehindTemplate says the server's pod runs and is not being
	// deleted, but was started from an older pod template than its
	// StatefulSet's (its revision annotations differ): a step cut short
	// after it wrote the template. StatefulSets use the OnDelete strategy,
	// so nothing else replaces that pod: the server is not at its target
	// and its step is taken again (which deletes the pod).
	PodBehindTemplate bool
	// Answered says whether the server answered on its monitoring port.
	Answered bool
	// ReportedRevision is the config revision the server itself reports
	// (server_metadata.config_revision in /varz); ignored unless Answered.
	ReportedRevision string
	// StartProblem says why the server's container cannot start or keeps
	// crashing, as the pod reports it ("ErrImagePull: ...", "CrashLoopBackOff:
	// exit code 1: <last log line>"); empty when none.
	StartProblem string
	// EphemeralStore says the server's JetStream store is not on a
	// PersistentVolumeClaim (its StatefulSet has no claim template): a
	// restart starts it empty.
	EphemeralStore bool
	// Reload is the last config reload of the server (its StatefulSet's
	// reload annotation); zero when none.
	Reload ServerReload
	// StagedRevision is the revision of the config staged in its ConfigMap
	// ahead of its reload (ReloadStep.Stage), which the server does not run
	// yet; empty when nothing is staged. ConfigRevision and Running are
	// then those of the config it runs.
	StagedRevision string
	// Running are the facts of the config this server runs: the config it was
	// last given (its ConfigMap, which changes only at its own step). Ignored
	// unless Created.
	Running ConfigFacts
}

// ClaimExpansion is a claim growing in place.
type ClaimExpansion struct {
	// Size is the storage request it grows to, e.g. 2Gi.
	Size string
	// Requested says the claim's own request already is Size: the storage
	// class (and then the kubelet, for the filesystem) is resizing it.
	Requested bool
	// Progress is what the claim reports, e.g. "1Gi of 2Gi, Resizing" or
	// "FileSystemResizePending: waiting for the kubelet".
	Progress string
}

// ReloadPhase is how far a server's config reload went.
type ReloadPhase string

const (
	// ReloadStarted: the Reload step wrote the server's ConfigMap and asks
	// the server to reload until it reports the revision.
	ReloadStarted ReloadPhase = "Started"
	// ReloadDone: the server reported the revision after the reload.
	ReloadDone ReloadPhase = "Done"
	// ReloadRefused: nats-server answered the reload with an error.
	ReloadRefused ReloadPhase = "Refused"
)

// ServerReload is a server's last config reload.
type ServerReload struct {
	// Revision is the server's config revision the reload applies.
	Revision string
	Phase    ReloadPhase
	// Since is when the reload started (Started) or ended.
	Since metav1.Time
	// Message is nats-server's error of a refused reload.
	Message string
}

// Verdict is the planner's copy of the Settled verdict of an observation
// (observe.Verdict: pkg/observe may not depend on this package, nor this
// one on pkg/observe, so the planner keeps its own).
type Verdict struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// Observation is the part of the observed Snapshot the planner needs.
type Observation struct {
	// Observed says whether observing produced a Snapshot at all.
	Observed bool
	// Settled is the Settled condition the Snapshot implies.
	Settled Verdict
	// MetaLeader is the JetStream meta leader every server names; empty when
	// none or when they disagree.
	MetaLeader string
	// MetaMembers are the servers in the JetStream meta group.
	MetaMembers []string
	// MetaCurrent are the meta group members current in the meta leader's
	// view, the leader included.
	MetaCurrent []string
	// Streams are the streams JetStream holds, in every account.
	Streams []StreamRef
	// LastSeqs are the streams' last sequences as their leaders report
	// them, where known (a migration holds when a stream grew after its
	// backup).
	LastSeqs []StreamSeq
	// Assets are the streams and consumers (KV and object store buckets are
	// streams) with their members, from the Raft groups observed.
	Assets []Asset
	// Silent are the servers with objects (a StatefulSet) that did not
	// answer: what they hold is unknown, never taken as nothing. Streams
	// and Assets list only what answering servers report.
	Silent []string
	// Gateways are the clusters some server has an outbound gateway to
	// (its /gatewayz): those already in the supercluster, so in its meta
	// group.
	Gateways []string
}

// streamsKnown says Streams lists every stream: the cluster was observed
// and every server with objects answered.
func (o *Observation) streamsKnown() bool { return o.Observed && len(o.Silent) == 0 }

// unknownWhy says why the streams are not all known ("" when they are):
// "the NATS cluster is not observed", or "demo-1, demo-2 did not answer:
// streams on them are not listed".
func (o *Observation) unknownWhy() string {
	switch {
	case !o.Observed:
		if o.Settled.Message != "" {
			return o.Settled.Message
		}
		return "the NATS cluster is not observed"
	case len(o.Silent) == 1:
		return o.Silent[0] + " did not answer: streams on it are not listed"
	case len(o.Silent) > 1:
		return strings.Join(o.Silent, ", ") + " did not answer: streams on them are not listed"
	}
	return ""
}

// Asset is a stream or consumer and where its copies are.
type Asset struct {
	// Account is the account's public key, or $G.
	Account string
	// Name is the stream name, or "stream/consumer".
	Name string
	// Leader is the server leading the group; empty when none.
	Leader string
	// Members are the servers holding a replica.
	Members []string
	// Current are the members whose copy is current (the leader's view; the
	// leader included).
	Current []string
}

// StreamSeq is a stream's last sequence.
type StreamSeq struct {
	Stream  StreamRef
	LastSeq uint64
}

// StreamRef names a stream.
type StreamRef struct {
	// Account is the account's public key, or $G for the global account.
	Account string
	// Name is the stream name.
	Name string
}

// Blocked is why the target cannot be computed or acted on.
type Blocked struct {
	// Reason is the Progressing reason, e.g. TrustNotFound, InvalidSpec,
	// ReconcileFailed.
	Reason string
	// Message says what is wrong and what to do; "no server was changed" is
	// appended.
	Message string
}

// StepKind is what a step does. The controller executes each kind with its
// own payload and refuses a kind it does not know.
type StepKind string

const (
	// RestartOne updates one server's ConfigMap and StatefulSet to the target
	// and restarts it. Payload: Servers (one) and the restart fields.
	RestartOne StepKind = "RestartOne"
	// RestartAll updates every server to the target and restarts them all
	// together (an outage). Payload: Servers (all) and the restart fields.
	RestartAll StepKind = "RestartAll"
	// Reload applies one server's config without a restart: it records the
	// reload on the server's StatefulSet (Started), writes its ConfigMap,
	// and asks the server to reload until it reports the revision (then
	// Done), or records nats-server's refusal (Refused). Taken again while
	// the reload is in flight. Payload: Reload.
	Reload StepKind = "Reload"
	// RemoveServer takes one phase of removing a server beyond
	// spec.replicas (scaledown.go), or of replacing a server of the spec
	// (replace.go, Remove.Replace): evacuate its stream and consumer
	// replicas, step the meta leader down, stop it, remove its JetStream
	// peer, delete its objects. A replaced server is then created again
	// (Decision.Create). Payload: Remove.
	RemoveServer StepKind = "RemoveServer"
	// StartMigration starts a phase of a JetStream migration
	// (migration.go): the backup of every stream before the servers
	// restart together, or their restore once the servers run the target.
	// Payload: Migration.
	StartMigration StepKind = "StartMigration"
	// ExpandClaim raises one server's PersistentVolumeClaim storage request
	// to the claim template's, for its storage class to grow the volume in
	// place; no pod restarts. Payload: Expand.
	ExpandClaim StepKind = "ExpandClaim"
)

// StepKinds are every kind of step the planner takes. A new kind is added
// here, and the tests of pkg/controller (an executor) and pkg/kubectlnats
// (a plan verdict) then fail until it has both.
var StepKinds = []StepKind{RestartOne, RestartAll, Reload, RemoveServer, ExpandClaim, StartMigration}

// ReloadStep is the payload of a Reload step.
type ReloadStep struct {
	// Server is the server whose config is reloaded.
	Server string
	// Revision is the server's target config revision.
	Revision string
	// Confirmed says the server already reports Revision: record the reload
	// Done and send nothing.
	Confirmed bool
	// Stage are the servers still to be reloaded onto their target in
	// this rollout whose ConfigMaps may be written now, ahead of their own
	// steps, each keeping the config it runs (AnnotationStagedFrom): the
	// kubelet then updates their mounted files while this server reloads,
	// and each is reloaded at its turn without waiting for its file. Only
	// servers whose own step would be a reload are staged: a staged file
	// changes nothing until its server is asked to reload, and a server
	// that restarts meanwhile starts on a config that reloads from the one
	// it ran.
	Stage []string
}

// RemoveServerStep is the payload of a RemoveServer step.
type RemoveServerStep struct {
	// Server is the server removed.
	Server string
	// Phase is what this step does of the removal.
	Phase clusterv1beta1.RemovalPhase
	// Successor is the server the meta leader should hand over to
	// (RemovalSteppingDown).
	Successor string
	// Replace says the server is a server of the spec, replaced: it is
	// created again, empty, once its objects are gone.
	Replace bool
}

// ExpandClaimStep is the payload of an ExpandClaim step.
type ExpandClaimStep struct {
	// Server is the server whose claim grows.
	Server string
}

// Step is the one destructive action of a sync.
type Step struct {
	// Kind is what the step does.
	Kind StepKind
	// Reload, Remove and Expand are the payloads of those kinds; nil for a
	// restart.
	Reload *ReloadStep
	Remove *RemoveServerStep
	Expand *ExpandClaimStep
	// Migration is the payload of StartMigration.
	Migration *MigrationStep

	// The restart payload (RestartOne, RestartAll):

	// Servers are the servers it restarts, in order.
	Servers []string
	// Forced says the step goes through a closed gate or a pause because of
	// the force-step annotation.
	Forced bool
	// Down says the step restarts a server that is down through a closed
	// gate, because the rest of the cluster is settled without it (never
	// with Forced).
	Down bool
	// ResetJetStream says JetStream starts empty after this step because the
	// system account changes; the controller emits a JetStreamReset Event
	// naming StreamsLeftBehind.
	ResetJetStream bool
	// ResetWhy says why, with ResetJetStream: "the system account
	// changes", "the cluster name changes", or the standalone server's
	// reason.
	ResetWhy string
	// StreamsLeftBehind are the streams left on the volumes, unreachable.
	StreamsLeftBehind []StreamRef
	// AcceptedLoss are the streams and consumers whose only current copy the
	// step destroys (a server without a volume), accepted by force-step or
	// restart-all=reset-jetstream; the controller records them in an Event.
	AcceptedLoss []StreamRef
	// QuorumLoss are the Raft groups (GroupTolerance.Group) whose writes stop
	// while the server restarts, accepted by force-step or
	// spec.rollout.acceptQuorumLoss; the controller records them in an Event.
	QuorumLoss []string
}

// Hold says why no step is taken while the rollout is not done.
type Hold struct {
	// Reason is the Progressing reason.
	Reason string
	// Message is the Progressing message.
	Message string
	// WaitingFor is the closed gate check (one of the Gate* constants), or the
	// annotation (with its value) that would release a held transition, or
	// empty for a pause.
	WaitingFor string
	// Notify says the hold needs the user's attention (anything but waiting
	// for a gate that has been closed for less than GateBlockedAfter): the
	// controller emits an Event when such a hold starts, changes reason or
	// ends. Notifies(reason) says the same of a reason already in status.
	Notify bool
}

// Decision is what Plan decided. At most one of Step and Hold is set; neither
// means the cluster is up to date or being created.
type Decision struct {
	// Step is the one step to take now, if any.
	Step *Step
	// Create are the servers to create at the target (their ConfigMap and
	// StatefulSet), in ordinal order; never set while Deleting, with
	// Blocked or a held scale-down or claim change.
	Create []string
	// Hold says why no step is taken while the rollout is not done.
	Hold *Hold
	// ReleaseFinalizer says to remove the NatsCluster's finalizer
	// (FinalizerStreams) so its deletion goes on: only while Deleting, when
	// JetStream holds no streams or force-delete is set.
	ReleaseFinalizer bool
	// DeleteClaims says to delete the servers' claims before the finalizer
	// goes (with ReleaseFinalizer, when Input.DeleteClaims).
	DeleteClaims bool
	// ClearAnnotations are one-shot annotations to remove: acted on with this
	// step, or naming nothing left to do.
	ClearAnnotations []string
	// Annotate are annotations to set on the NatsCluster before any server
	// is created or stepped: the controller's own marks (a replaced
	// server's AnnotationReplaceRejoining).
	Annotate map[string]string
	// Changes are what differs between the running configs and the target,
	// sorted; the controller may use them for status.config.restartReason.
	Changes []Change
	// Rollout is the status.rollout to write; nil when nothing is in flight.
	Rollout *clusterv1beta1.RolloutStatus
	// Progressing is the Progressing condition without time and generation,
	// which the controller sets.
	Progressing metav1.Condition
	// Taken is what Rollout and Progressing become once Step is taken, when
	// the planner knows it: a restart step through an open gate waits next
	// for its server to run the target (GateTargetRevision), which the sync
	// after the step finds closed. The controller writes it instead of
	// Rollout and Progressing when it took the step, so that sync has no
	// status to write. nil: Rollout and Progressing stand either way.
	Taken *Taken
	// Soon says to look again within a second: a step was taken, a rollout
	// is in flight, or a hold NATS itself can release.
	Soon bool
	// Removals is status.removals: the server being removed and its phase.
	Removals []clusterv1beta1.ServerRemoval
	// AppliedBy and RestartReason are status.config's when Progressing is
	// UpToDate: Reload when every server of the rollout reloaded (or was
	// added), else Restart with the rollout's restart reason.
	AppliedBy     clusterv1beta1.ConfigAppliedBy
	RestartReason string
	// KeepsTurn says the rollout is taking steps of its own: a
	// supercluster member keeps its turn (the supercluster Lease). False
	// when it takes none for now (done, held, paused, deleting, blocked at
	// its gate, a server that cannot start, a migration waiting on its
	// Job): the member gives its turn up so the other members go on.
	KeepsTurn bool
}

// Taken is a step's status.rollout and Progressing condition once taken.
type Taken struct {
	Rollout     *clusterv1beta1.RolloutStatus
	Progressing metav1.Condition
}

// OnceTaken is d as the controller reports it after taking its step:
// Rollout and Progressing from Taken, when the planner gave one.
func (d Decision) OnceTaken() Decision {
	if d.Taken != nil {
		d.Rollout, d.Progressing = d.Taken.Rollout, d.Taken.Progressing
	}
	return d
}
