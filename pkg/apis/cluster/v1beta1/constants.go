package v1beta1

// Condition types of a NatsCluster.
const (
	// ConditionReady says whether enough servers are ready to serve.
	ConditionReady = "Ready"
	// ConditionSettled says whether every Raft group has a leader and every
	// member is current, as NATS itself reports.
	ConditionSettled = "Settled"
	// ConditionProgressing says whether a change is being rolled out or held.
	ConditionProgressing = "Progressing"
	// ConditionObjectsWritten says whether the supporting objects the
	// servers do not need to run (the Services, the PodDisruptionBudget,
	// the NetworkPolicy, the PodMonitor, the client Certificate) are
	// written. A failed write is False WriteFailed with the API server's
	// words; it never stops a step of the servers.
	ConditionObjectsWritten = "ObjectsWritten"
	// ConditionTrustCurrent (with spec.auth) says whether every JWT of the
	// trust is valid for longer than 7 days: False JWTExpiresSoon names
	// those that expire sooner. One past its expiry holds the cluster with
	// Progressing=False TrustInvalid or AccountTrustInvalid.
	ConditionTrustCurrent = "TrustCurrent"
	// ConditionGatewaysConnected (with spec.gateway) says whether every
	// server has an outbound gateway connection to every remote cluster and
	// to every cluster it learned of, as its /gatewayz reports: False
	// GatewaysDisconnected names the servers and clusters that are not.
	ConditionGatewaysConnected = "GatewaysConnected"
)

// ConditionLeafnodesConnected (with spec.leafnodes.remotes) says whether
// every server has a leaf connection to every remote, as its /leafz
// reports: False LeafnodesDisconnected names the servers and remotes that
// are not.
const ConditionLeafnodesConnected = "LeafnodesConnected"

// ConditionListenersAuthenticated (with spec.gateway or
// spec.leafnodes.accept) says whether the gateway and leaf listeners
// authenticate who connects: the gateway by TLS verified on both sides, the
// leaf listener by spec.auth. False InsecureListeners names the listeners
// the spec runs open (spec.gateway.insecure, spec.leafnodes.insecure).
const ConditionListenersAuthenticated = "ListenersAuthenticated"

// Reasons of the ListenersAuthenticated condition.
const (
	ReasonListenersAuthenticated = "Authenticated"
	ReasonInsecureListeners      = "InsecureListeners"
)

// Reasons of the LeafnodesConnected condition.
const (
	ReasonAllLeafnodesConnected = "AllLeafnodesConnected"
	ReasonLeafnodesDisconnected = "LeafnodesDisconnected"
)

// Reasons of the GatewaysConnected condition.
const (
	ReasonAllGatewaysConnected = "AllGatewaysConnected"
	ReasonGatewaysDisconnected = "GatewaysDisconnected"
)

// Reasons of the TrustCurrent condition (JWTExpiresSoon is also the reason
// of the Warning Event when the warning starts or changes).
const (
	ReasonJWTsCurrent    = "JWTsCurrent"
	ReasonJWTExpiresSoon = "JWTExpiresSoon"
)

// Reasons of the ObjectsWritten condition (WriteFailed is also the reason
// of the Warning Event when a failure starts or changes).
const (
	ReasonAllWritten  = "AllWritten"
	ReasonWriteFailed = "WriteFailed"
)

// Reasons of the Ready condition.
const (
	ReasonAllServersReady   = "AllServersReady"
	ReasonQuorumAvailable   = "QuorumAvailable"
	ReasonQuorumUnavailable = "QuorumUnavailable"
)

// Reasons of the Settled condition, most severe first among the False ones.
const (
	ReasonAllGroupsCurrent  = "AllGroupsCurrent"
	ReasonServersSilent     = "ServersSilent"
	ReasonGroupsLeaderless  = "GroupsLeaderless"
	ReasonMembersOffline    = "MembersOffline"
	ReasonGroupsCatchingUp  = "GroupsCatchingUp"
	ReasonObservationFailed = "ObservationFailed"
)

// Reasons of the Progressing condition. True: a rollout moves or waits;
// False: up to date, or held until the user acts.
const (
	ReasonCreating       = "Creating"
	ReasonRollingRestart = "RollingRestart"
	ReasonGateBlocked    = "GateBlocked"
	ReasonRolloutPaused  = "RolloutPaused"
	ReasonReloading      = "Reloading"
	// ReasonScalingDown: a server beyond spec.replicas is being removed
	// ("removing demo-4 (demo-4, demo-3 to remove): moving its replicas of 3
	// streams and consumers to the other servers").
	ReasonScalingDown = "ScalingDown"
	// ReasonScaleDownBlocked (False): a scale-down cannot go on without the
	// user: a stream or consumer has more replicas than spec.replicas
	// leaves, or the controller has no system access.
	ReasonScaleDownBlocked = "ScaleDownBlocked"
	// ReasonScalingUp: servers are being added and no running server needs
	// a step ("adding demo-3, demo-4 (5 servers), no running server
	// restarts; waiting for MetaMembership").
	ReasonScalingUp = "ScalingUp"
	// ReasonReplacingServer: a server is being replaced by an empty one
	// (AnnotationReplaceServer, or a claim template change its storage
	// class cannot apply in place): its replicas move off, it is stopped
	// and removed from the JetStream meta group, its claim and StatefulSet
	// are deleted, and it is created again and catches up ("replacing
	// demo-1: waiting for it to rejoin the JetStream meta group").
	ReasonReplacingServer = "ReplacingServer"
	// ReasonReplaceBlocked (False): a replacement cannot go on without the
	// user: the annotation names no server of the cluster, a stream would
	// lose its quorum or its only copy, or the controller has no system
	// access.
	ReasonReplaceBlocked = "ReplaceBlocked"
	// ReasonExpandingStorage: a server's claim is being grown in place to
	// the claim template's storage request (the storage class allows
	// expansion), one server at a time; no pod restarts.
	ReasonExpandingStorage = "ExpandingStorage"
	// ReasonCertificateNotReady (False): a TLS Secret spec.routes.tls or
	// spec.tls names is missing, lacks a key or holds no usable
	// certificate; no server was changed.
	ReasonCertificateNotReady = "CertificateNotReady"
	// ReasonRouteCAMissing (False): the generated route CA Secret
	// (<name>-routes-ca) is missing or unreadable while servers run TLS
	// routes. A new CA rolled one server at a time would split the cluster
	// (each server checks every new route against the CA it loaded), so
	// none is made until the Secret is restored, or restart-all restarts
	// every server together with a new one.
	ReasonRouteCAMissing = "RouteCAMissing"

	ReasonUpToDate          = "UpToDate"
	ReasonAuthChangeBlocked = "AuthChangeBlocked"
	// ReasonGatewayChangeBlocked: a gateway change that would split the
	// supercluster mid-way if rolled one server at a time (the gateway
	// added to or removed from a cluster without JetStream); the
	// restart-all annotation completes it.
	ReasonGatewayChangeBlocked = "GatewayChangeBlocked"
	// ReasonOwnMetaGroup: the gateway added to, or removed from, a cluster
	// that runs JetStream. Joining, its JetStream meta group and the
	// supercluster's would be two; leaving, its servers would take the
	// supercluster's meta group with them. Nothing the controller does
	// completes it: the message names the way out.
	ReasonOwnMetaGroup = "OwnMetaGroup"
	// ReasonStandaloneChangeBlocked: one JetStream server (standalone,
	// without a cluster block) becoming several, or several becoming one.
	// A standalone server's streams are not in a cluster's meta group:
	// nats-server deletes them as orphans 30 s after the cluster forms
	// (measured on 2.15.2); a standalone server loads no stream of more
	// than one replica. The restart-all annotation completes it, with
	// reset-jetstream when streams exist (back them up with a NatsBackup
	// first and restore them with a NatsRestore after).
	ReasonStandaloneChangeBlocked = "StandaloneChangeBlocked"
	ReasonTrustNotFound           = "TrustNotFound"
	ReasonTrustInvalid            = "TrustInvalid"
	ReasonAccountTrustNotFound    = "AccountTrustNotFound"
	ReasonAccountTrustInvalid     = "AccountTrustInvalid"
	ReasonCredentialsNotFound     = "CredentialsNotFound"
	ReasonReconcileFailed         = "ReconcileFailed"
	ReasonUnsupportedChange       = "UnsupportedChange"
	// ReasonInvalidSpec: a spec the CRD accepted fails a check only the
	// renderer makes; nothing was written.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonDataLossOnRestart: the next step would restart a server without
	// a volume that holds the only current copy of a stream or consumer.
	ReasonDataLossOnRestart = "DataLossOnRestart"
	// ReasonQuorumLossOnRestart: the next step would restart a server whose
	// absence leaves a Raft group (the JetStream meta group, an R2 stream or
	// consumer) without a majority of current members, so its writes stop
	// until the server is back. Released by force-step for one step, or by
	// spec.rollout.acceptQuorumLoss for every step.
	ReasonQuorumLossOnRestart = "QuorumLossOnRestart"
	// ReasonDeleting (False) is a hold: the NatsCluster is being deleted
	// while JetStream holds streams, or while the controller cannot tell
	// whether it does. Its finalizer FinalizerStreams stays until the
	// streams are gone or AnnotationForceDelete is set; no server is
	// created or stepped meanwhile.
	ReasonDeleting = "Deleting"
)

// Event reasons that are not condition reasons.
const (
	// EventJetStreamReset names the streams a restart-all left behind.
	EventJetStreamReset = "JetStreamReset"
	// EventServerRestarted is emitted when a step restarts a server.
	EventServerRestarted = "ServerRestarted"
	// EventServerReloaded: a server reported the revision it was reloaded
	// onto, without a restart.
	EventServerReloaded = "ServerReloaded"
	// EventReloadRefused: nats-server answered a reload with an error; the
	// server is restarted instead.
	EventReloadRefused = "ReloadRefused"
	// EventServerRemoval: a removal of a server entered a phase.
	EventServerRemoval = "ServerRemoval"
	// EventServersRestarted is emitted when every server restarts together.
	EventServersRestarted = "ServersRestarted"
	// EventServerCannotStart says a server's container cannot start or keeps
	// crashing, and why.
	EventServerCannotStart = "ServerCannotStart"
	// EventDataLossAccepted names the streams and consumers a step destroyed
	// because force-step (or restart-all=reset-jetstream) accepted it.
	EventDataLossAccepted = "DataLossAccepted"
	// EventQuorumLossAccepted names the Raft groups whose writes stop while
	// a step's server restarts, because force-step or
	// spec.rollout.acceptQuorumLoss accepted it.
	EventQuorumLossAccepted = "QuorumLossAccepted"
)

// One-shot annotations, cleared by the controller once acted on.
const (
	// AnnotationRestartAll restarts every server together to the target
	// revision. Value RestartAllResetJetStream accepts that JetStream starts
	// empty when the system account changes.
	AnnotationRestartAll = "cluster.nats-operator.io/restart-all"
	// AnnotationForceStep takes the named server's next step through a closed
	// gate or a pause.
	AnnotationForceStep = "cluster.nats-operator.io/force-step"
	// AnnotationForceDelete lets a NatsCluster being deleted go although
	// JetStream holds streams (or the controller cannot tell): the
	// controller removes FinalizerStreams, and the garbage collector deletes
	// the servers. Their PersistentVolumeClaims are kept (the claim
	// templates retain them). Any value; it is read only while deleting.
	AnnotationForceDelete = "cluster.nats-operator.io/force-delete"
	// AnnotationReplaceServer replaces the named server (e.g. demo-1) by an
	// empty one: its replicas move to the other servers, it is stopped and
	// removed from the JetStream meta group, its claim and StatefulSet are
	// deleted and created again, and the annotation is cleared once the new
	// server has rejoined and caught up (ReasonReplacingServer).
	AnnotationReplaceServer = "cluster.nats-operator.io/replace-server"
	// AnnotationReplaceRejoining is the controller's own mark, set when the
	// replaced server's objects are gone and it is created again: the
	// server it names is the new, empty one, waiting to rejoin. Cleared
	// with AnnotationReplaceServer.
	AnnotationReplaceRejoining = "cluster.nats-operator.io/replace-server-rejoining"
	// RestartAllResetJetStream is the value of AnnotationRestartAll that
	// accepts leaving existing streams behind.
	RestartAllResetJetStream = "reset-jetstream"
	// RestartAllMigrateJetStream is the value of AnnotationRestartAll that
	// keeps the streams through a change that moves the system account
	// (adding auth): every stream is backed up (a NatsBackup), every server
	// restarted together, and the streams restored (a NatsRestore) into
	// the account of spec.jetstream.migration.credentials.
	RestartAllMigrateJetStream = "migrate-jetstream"

	// LabelMigrationOf names the NatsCluster whose JetStream migration a
	// NatsBackup or NatsRestore is; LabelMigrationRevision the target
	// revision it is for.
	LabelMigrationOf       = "cluster.nats-operator.io/migration-of"
	LabelMigrationRevision = "cluster.nats-operator.io/migration-revision"
)

// AnnotationAllowReferencesFrom, on a NatsCluster, lists the namespaces
// whose NatsClusters may name it by clusterRef (a gateway or leaf remote):
// comma-separated, or "*" for every namespace. Such a reference points the
// referring cluster's servers at it and copies its routes CA; from another
// namespace, one it does not list is held (InvalidSpec), nothing of it read.
// References from its own namespace need none.
const AnnotationAllowReferencesFrom = "cluster.nats-operator.io/allow-references-from"

// Reasons of a JetStream migration (restart-all=migrate-jetstream).
const (
	// ReasonMigratingJetStream: Progressing True while the streams are
	// backed up, the servers restarted together, and the streams restored.
	ReasonMigratingJetStream = "MigratingJetStream"
	// ReasonMigrationBlocked: Progressing False, the migration cannot go
	// on (no spec.jetstream.migration, the backup or the restore failed, a
	// stream made after the backup); the message names the way out.
	ReasonMigrationBlocked = "MigrationBlocked"
)

// FinalizerStreams is the finalizer the controller puts on every
// NatsCluster: deleting the cluster waits while JetStream holds streams,
// until they are deleted or AnnotationForceDelete is set (ReasonDeleting).
const FinalizerStreams = "cluster.nats-operator.io/streams"

// MaxNameLength is the longest NatsCluster name (49 characters), so that
// every derived name and label fits Kubernetes' limits at the largest
// replicas (99: ordinals up to 98): the StatefulSet <name>-98 labels its
// pod with controller-revision-hash <name>-98-<hash of up to 10 characters>,
// a label value of at most 63 characters. (The pod's hostname <name>-98-0
// and the Service <name>-headless, both DNS labels of at most 63, allow
// longer names.) The CRD refuses longer names at apply.
const MaxNameLength = 49

// Labels on every object the controller makes.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelCluster   = "cluster.nats-operator.io/cluster"
	LabelServer    = "cluster.nats-operator.io/server"

	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "nats-operator"
	// AnnotationConfigRevision is the pod template annotation carrying the
	// config revision the server's pod was last restarted for: a restart step
	// writes it (and replaces the pod), a reload would not.
	AnnotationConfigRevision = "cluster.nats-operator.io/config-revision"
	// AnnotationRoutesCA (on a server's ConfigMap) is a digest of the route
	// CA the server was last given: the CA it checks every new route
	// against. Another CA cannot roll one server at a time (RouteCA).
	AnnotationRoutesCA = "cluster.nats-operator.io/routes-ca"
	// AnnotationTemplateRevision is the pod template annotation carrying the
	// template revision: a digest of the server's StatefulSet spec without
	// the two revision annotations. A config-only change leaves it alone.
	AnnotationTemplateRevision = "cluster.nats-operator.io/template-revision"
	// AnnotationCreatedFor is the StatefulSet annotation carrying the
	// cluster's config revision the server was created for: a server created
	// for the revision the cluster rolls to was added by a scale-up. Only
	// the StatefulSet's creation writes it.
	AnnotationCreatedFor = "cluster.nats-operator.io/created-for"
	// AnnotationReload is the StatefulSet annotation recording a config
	// reload of the server: "<config revision> <Started|Done|Refused>
	// <RFC 3339 time>[ <nats-server's error>]". A Reload step writes it
	// before the ConfigMap, so a controller that restarts mid-reload knows
	// the change was found reloadable; it is metadata, so writing it
	// restarts nothing.
	AnnotationReload = "cluster.nats-operator.io/reload"
	// AnnotationStagedFrom is the ConfigMap annotation of a server whose
	// next config was staged ahead of its reload: the ConfigMap already
	// holds the config the server will be reloaded onto (so the kubelet
	// updates the mounted file while earlier servers reload), and this
	// annotation holds the config the server still runs, which the
	// controller reads as what it runs until its own Reload step rewrites
	// the ConfigMap without it.
	AnnotationStagedFrom = "cluster.nats-operator.io/staged-from"
)

// Gate checks, in the order the planner evaluates them.
const (
	GateObserved       = "Observed"
	GateSettled        = "Settled"
	GateMetaMembership = "MetaMembership"
	GatePodsReady      = "PodsReady"
	GateTargetRevision = "TargetRevision"
)
