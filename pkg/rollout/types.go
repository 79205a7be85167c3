package rollout

import (
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

	// TargetRevision is the config revision pkg/render computed for the spec.
	TargetRevision string

	// Target are the facts of the target config, the same on every server.
	Target ConfigFacts

	// ConvergedRevision is status.config.revision: the revision the cluster
	// last converged to; empty while the cluster was never up to date (it is
	// being created).
	ConvergedRevision string

	// Servers are the servers of the target spec, in any order.
	Servers []ServerState

	// Observation is what observing the NATS cluster found.
	Observation Observation

	// Previous is status.rollout as last written (nil when absent). Only the
	// gate's since and the sticky current come from it: no step depends on it.
	Previous *clusterv1beta1.RolloutStatus

	// Annotations are the NatsCluster's annotations; Plan reads the one-shot
	// restart-all and force-step annotations.
	Annotations map[string]string

	// Paused is spec.rollout.paused.
	Paused bool

	// Now is the time of this sync.
	Now metav1.Time
}

// ServerState is one server as the cluster shows it.
type ServerState struct {
	// Name is the server name, e.g. demo-2.
	Name string
	// Ordinal is the server's index, 2 for demo-2.
	Ordinal int
	// TemplateRevision is the config revision annotation of the server's
	// StatefulSet pod template; empty when the StatefulSet does not exist yet
	// (the controller creates it directly at the target revision).
	TemplateRevision string
	// PodExists says whether the server's pod exists.
	PodExists bool
	// PodReady says whether the server's pod is Ready.
	PodReady bool
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
	// Running are the facts of the config this server runs: the config it was
	// last given (its ConfigMap, which changes only at its own step), or, if
	// the controller prefers, what the server reports. Ignored when
	// TemplateRevision is empty.
	Running ConfigFacts
}

// Verdict is the Settled verdict of an observation.
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
	// Assets are the streams and consumers (KV and object store buckets are
	// streams) with their members, from the Raft groups observed.
	Assets []Asset
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

// StreamRef names a stream.
type StreamRef struct {
	// Account is the account's public key, or $G for the global account.
	Account string
	// Name is the stream name.
	Name string
}

// StepKind is what a step does.
type StepKind string

const (
	// RestartOne updates one server's StatefulSet and ConfigMap to the target
	// revision and restarts it.
	RestartOne StepKind = "RestartOne"
	// RestartAll updates every server to the target revision and restarts them
	// all together (an outage).
	RestartAll StepKind = "RestartAll"
)

// Step is the one destructive action of a sync.
type Step struct {
	// Kind is what the step does.
	Kind StepKind
	// Servers are the servers it touches, in order.
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
	// StreamsLeftBehind are the streams left on the volumes, unreachable.
	StreamsLeftBehind []StreamRef
	// AcceptedLoss are the streams and consumers whose only current copy the
	// step destroys (a server without a volume), accepted by force-step or
	// restart-all=reset-jetstream; the controller records them in an Event.
	AcceptedLoss []StreamRef
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
}

// Decision is what Plan decided. At most one of Step and Hold is set; neither
// means the cluster is up to date or being created.
type Decision struct {
	// Step is the one step to take now, if any.
	Step *Step
	// Hold says why no step is taken while the rollout is not done.
	Hold *Hold
	// ClearAnnotations are one-shot annotations to remove: acted on with this
	// step, or naming nothing left to do.
	ClearAnnotations []string
	// Changes are what differs between the running configs and the target,
	// sorted; the controller may use them for status.config.restartReason.
	Changes []Change
	// Rollout is the status.rollout to write; nil when nothing is in flight.
	Rollout *clusterv1beta1.RolloutStatus
	// Progressing is the Progressing condition without time and generation,
	// which the controller sets.
	Progressing metav1.Condition
}
