package v1beta1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NatsCluster is a NATS cluster with JetStream, run as one single-replica
// StatefulSet per server. Changes reach the servers one at a time, each step
// gated on what NATS itself reports; a change that cannot be made one server
// at a time is held with Progressing=False and a reason naming the way out.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nc;natsc,categories=nats
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Settled",type=string,JSONPath=`.status.conditions[?(@.type=="Settled")].status`
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].reason`
// +kubebuilder:printcolumn:name="Gateways",type=string,JSONPath=`.status.conditions[?(@.type=="GatewaysConnected")].status`,priority=1
// +kubebuilder:printcolumn:name="Leafnodes",type=string,JSONPath=`.status.conditions[?(@.type=="LeafnodesConnected")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 49",message="metadata.name must be at most 49 characters: the names and labels of each server's StatefulSet, pod and Services are derived from it and must fit Kubernetes' 63-character limits with up to 99 servers"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label starting with a letter (lower case letters, digits and '-'): it names the cluster's Services, StatefulSets and pods"
type NatsCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the NATS cluster that should run.
	// +required
	Spec NatsClusterSpec `json:"spec"`

	// status is what the controller last observed and did.
	// +optional
	Status NatsClusterStatus `json:"status,omitempty"`
}

// NatsClusterSpec is the desired NATS cluster.
// +kubebuilder:validation:XValidation:rule="!has(self.jetstream) || self.replicas >= 2 || !has(self.gateway)",message="a single JetStream server runs standalone, without the cluster block a supercluster's shared JetStream needs: use replicas 3 with spec.gateway",fieldPath=".replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.leafnodes) || !has(self.leafnodes.accept) || !self.leafnodes.accept || has(self.auth) || (has(self.leafnodes.insecure) && self.leafnodes.insecure)",message="accept without spec.auth admits any leaf unauthenticated: set spec.auth, or leafnodes.insecure: true",fieldPath=".leafnodes.accept"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || (has(self.gateway.insecure) && self.gateway.insecure) || !has(self.routes) || !has(self.routes.tls) || !has(self.routes.tls.mode) || self.routes.tls.mode != 'Disabled'",message="gateway TLS (the default) needs route TLS: enable it, or set gateway.insecure: true",fieldPath=".gateway"
// +kubebuilder:validation:XValidation:rule="!has(self.websocket) || (has(self.websocket.noTLS) && self.websocket.noTLS) || has(self.tls)",message="spec.websocket serves wss:// with the client certificate: set spec.tls, or websocket.noTLS behind a proxy that terminates TLS",fieldPath=".websocket"
// +kubebuilder:validation:XValidation:rule="!has(self.mqtt) || (has(self.mqtt.noTLS) && self.mqtt.noTLS) || has(self.tls)",message="spec.mqtt requires TLS with the client certificate: set spec.tls, or mqtt.noTLS for MQTT over plain TCP",fieldPath=".mqtt"
// +kubebuilder:validation:XValidation:rule="!has(self.mqtt) || has(self.jetstream)",message="spec.mqtt needs spec.jetstream: nats-server keeps MQTT sessions and QoS 1 and 2 messages in JetStream streams",fieldPath=".mqtt"
// +kubebuilder:validation:XValidation:rule="!has(self.monitoring) || !has(self.monitoring.tls) || !self.monitoring.tls || has(self.tls)",message="spec.monitoring.tls serves HTTPS with the client certificate: set spec.tls",fieldPath=".monitoring.tls"
// +kubebuilder:validation:XValidation:rule="!has(self.websocket) || !(self.websocket.port in [4222, 6222, 7222, 7422, 7777, 8222])",message="spec.websocket.port must differ from the servers' other ports (4222, 6222, 7222, 7422, 7777, 8222)",fieldPath=".websocket.port"
// +kubebuilder:validation:XValidation:rule="!has(self.mqtt) || !(self.mqtt.port in [4222, 6222, 7222, 7422, 7777, 8222])",message="spec.mqtt.port must differ from the servers' other ports (4222, 6222, 7222, 7422, 7777, 8222)",fieldPath=".mqtt.port"
// +kubebuilder:validation:XValidation:rule="!has(self.websocket) || !has(self.mqtt) || self.websocket.port != self.mqtt.port",message="spec.websocket.port and spec.mqtt.port must differ",fieldPath=".mqtt.port"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || (!has(self.resources.limits) && !has(self.resources.requests)) || !has(self.podTemplate) || !has(self.podTemplate.spec) || !has(self.podTemplate.spec.containers) || self.podTemplate.spec.containers.all(c, c.name != 'nats' || !has(c.resources))",message="the nats container's resources are set either in spec.resources or in spec.podTemplate.spec.containers[name=nats].resources, not both",fieldPath=".podTemplate.spec.containers"
type NatsClusterSpec struct {
	// version is the nats-server version every server runs, a semantic
	// version such as 2.15.2; the image tag is always this. A change may move
	// the minor version by at most one, up or down; any patch change is
	// allowed.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(0|[1-9][0-9]*)[.](0|[1-9][0-9]*)[.](0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$')",message="must be a semantic version such as 2.15.2 (no leading v)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+[.][0-9]+[.]') || !oldSelf.matches('^[0-9]+[.][0-9]+[.]') || (self.split('.')[0] == oldSelf.split('.')[0] && int(self.split('.')[1]) - int(oldSelf.split('.')[1]) <= 1 && int(oldSelf.split('.')[1]) - int(self.split('.')[1]) <= 1)",message="a version change may move the minor version by at most one and may not change the major version; step through each minor version in turn"
	Version string `json:"version"`

	// image is where the nats-server image comes from.
	// +optional
	// +kubebuilder:default={}
	Image ImageSpec `json:"image,omitempty"`

	// replicas is the number of servers, at least 1. Servers are named
	// <name>-0 to <name>-(replicas-1). One server with JetStream runs
	// standalone: nats-server's config has no cluster block.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	Replicas int32 `json:"replicas"`

	// resources are the container resources of nats-server: cpu, memory and
	// ephemeral-storage, each request no larger than its limit. With
	// limits.memory set, GOMEMLIMIT is 90% of it and JetStream's
	// max_memory_store 75% of it, unless jetstream.limits sets it.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.claims)",message="resource claims are not supported"
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || self.limits.all(k, k in ['cpu', 'memory', 'ephemeral-storage'])",message="limits may name only cpu, memory and ephemeral-storage",fieldPath=".limits"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || self.requests.all(k, k in ['cpu', 'memory', 'ephemeral-storage'])",message="requests may name only cpu, memory and ephemeral-storage",fieldPath=".requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || !('cpu' in self.limits) || quantity(string(self.limits['cpu'])).compareTo(quantity('0')) >= 0",message="limits.cpu must not be negative",fieldPath=".limits"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !('cpu' in self.requests) || quantity(string(self.requests['cpu'])).compareTo(quantity('0')) >= 0",message="requests.cpu must not be negative",fieldPath=".requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || !('cpu' in self.requests) || !('cpu' in self.limits) || quantity(string(self.requests['cpu'])).compareTo(quantity(string(self.limits['cpu']))) <= 0",message="requests.cpu must be less than or equal to limits.cpu",fieldPath=".requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || !('memory' in self.limits) || quantity(string(self.limits['memory'])).compareTo(quantity('0')) >= 0",message="limits.memory must not be negative",fieldPath=".limits"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !('memory' in self.requests) || quantity(string(self.requests['memory'])).compareTo(quantity('0')) >= 0",message="requests.memory must not be negative",fieldPath=".requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || !('memory' in self.requests) || !('memory' in self.limits) || quantity(string(self.requests['memory'])).compareTo(quantity(string(self.limits['memory']))) <= 0",message="requests.memory must be less than or equal to limits.memory",fieldPath=".requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || !('ephemeral-storage' in self.limits) || quantity(string(self.limits['ephemeral-storage'])).compareTo(quantity('0')) >= 0",message="limits.ephemeral-storage must not be negative",fieldPath=".limits"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !('ephemeral-storage' in self.requests) || quantity(string(self.requests['ephemeral-storage'])).compareTo(quantity('0')) >= 0",message="requests.ephemeral-storage must not be negative",fieldPath=".requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || !has(self.limits) || !('ephemeral-storage' in self.requests) || !('ephemeral-storage' in self.limits) || quantity(string(self.requests['ephemeral-storage'])).compareTo(quantity(string(self.limits['ephemeral-storage']))) <= 0",message="requests.ephemeral-storage must be less than or equal to limits.ephemeral-storage",fieldPath=".requests"
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// jetstream, when present, turns JetStream on.
	// +optional
	JetStream *JetStreamSpec `json:"jetstream,omitempty"`

	// serverTags are rendered as key:value server tags on every server, for
	// JetStream placement.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) > 0)",message="server tag keys must not be empty"
	ServerTags map[string]string `json:"serverTags,omitempty"`

	// auth, when absent, runs the servers without accounts or client auth:
	// every client lands in the global account. When present the servers run
	// in operator mode, trusting the NATS operator of trustRef. Adding or
	// removing auth on a running cluster cannot roll out one server at a time;
	// it is held with AuthChangeBlocked (see the restart-all annotation).
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// rollout controls how changes reach the servers.
	// +optional
	Rollout RolloutSpec `json:"rollout,omitempty"`

	// routes configures the routes between the servers.
	// +optional
	Routes RoutesSpec `json:"routes,omitempty"`

	// tls, when present, makes clients connect over TLS (tls://) with the
	// certificate of a Secret or of a cert-manager Certificate. A new
	// certificate in the Secret is applied by config reload, without a
	// restart.
	// +optional
	TLS *ClientTLS `json:"tls,omitempty"`

	// podTemplate is merged over every server's pod: scheduling (node
	// selector, tolerations, affinity, topology spread, priority class),
	// the nats container's resources, env and probe timings, extra volumes
	// and sidecars. A change restarts the servers one at a time, gated like
	// any other.
	// +optional
	PodTemplate *PodTemplate `json:"podTemplate,omitempty"`

	// metrics are the Prometheus metrics of every server.
	// +optional
	// +kubebuilder:default={}
	Metrics MetricsSpec `json:"metrics,omitempty"`

	// networkPolicy is the NetworkPolicy of the servers' pods.
	// +optional
	// +kubebuilder:default={}
	NetworkPolicy NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// gateway, when present, joins the cluster to a supercluster of
	// NatsClusters (and other NATS clusters) over gateway connections.
	// +optional
	Gateway *GatewaySpec `json:"gateway,omitempty"`

	// leafnodes accepts leaf connections, connects to hubs as a leaf, or
	// both.
	// +optional
	LeafNodes *LeafNodesSpec `json:"leafnodes,omitempty"`

	// lameDuck is how long a server takes to leave when its pod stops (a
	// restart, a scale-down, a deletion): nats-server's lame duck mode,
	// which the pod's preStop hook starts. Unset, duration is 30s and
	// gracePeriod 10s. The pods' terminationGracePeriodSeconds is the sum
	// of duration, gracePeriod and 20s (60 with the defaults). nats-server
	// reloads neither setting, so a change restarts the servers one at a
	// time.
	// +optional
	LameDuck *LameDuckSpec `json:"lameDuck,omitempty"`

	// websocket, when present, makes every server accept NATS clients over
	// WebSocket.
	// +optional
	WebSocket *WebSocketSpec `json:"websocket,omitempty"`

	// mqtt, when present, makes every server accept MQTT clients; it needs
	// jetstream.
	// +optional
	MQTT *MQTTSpec `json:"mqtt,omitempty"`

	// monitoring is the servers' monitoring port.
	// +optional
	Monitoring *MonitoringSpec `json:"monitoring,omitempty"`
}

// LameDuckSpec is nats-server's lame duck mode. On the lame duck signal a
// server stops accepting clients, hands its Raft leaderships over and shuts
// JetStream down, waits gracePeriod, then closes its client connections
// spread over the rest of duration (at most a second apart, so a server
// with few clients exits well before duration is over), and exits.
// +kubebuilder:validation:XValidation:rule="(has(self.duration) && duration(self.duration) < duration('30s')) || duration(has(self.gracePeriod) ? self.gracePeriod : '10s') < duration(has(self.duration) ? self.duration : '30s')",message="spec.lameDuck.gracePeriod must be shorter than spec.lameDuck.duration (defaults 10s and 30s): nats-server refuses a lame_duck_grace_period that is not strictly lower than lame_duck_duration",fieldPath=".gracePeriod"
type LameDuckSpec struct {
	// duration is nats-server's lame_duck_duration: the time from the lame
	// duck signal over which the server closes its client connections, the
	// grace period included, so that its clients reconnect to the other
	// servers spread out rather than all at once. Default 30s, the least
	// nats-server accepts.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s')",message="spec.lameDuck.duration must be at least 30s: nats-server refuses a shorter lame_duck_duration"
	Duration *metav1.Duration `json:"duration,omitempty"`

	// gracePeriod is nats-server's lame_duck_grace_period: how long the
	// server waits, no longer accepting clients, before it closes the first
	// client connections, so that servers stopped close together do not
	// send their clients to each other. Default 10s; at least 1s (for
	// nats-server 0 means its default of 10s) and shorter than duration.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="spec.lameDuck.gracePeriod must be at least 1s: nats-server takes 0 for its default of 10s"
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// The lame duck settings of a spec that sets none (no spec.lameDuck, or one
// of its fields unset).
const (
	DefaultLameDuckDuration    = 30 * time.Second
	DefaultLameDuckGracePeriod = 10 * time.Second
)

// ImageSpec names the nats-server image.
type ImageSpec struct {
	// repository is the image repository; the tag is spec.version.
	// +optional
	// +kubebuilder:default=nats
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Repository string `json:"repository,omitempty"`

	// digest optionally pins the image alongside the version tag, as
	// sha256:<64 lowercase hex characters>.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	// +kubebuilder:validation:XValidation:rule="self.matches('^sha256:[a-f0-9]{64}$')",message="must be sha256: followed by 64 lowercase hex characters"
	Digest string `json:"digest,omitempty"`
}

// JetStreamSpec configures JetStream.
type JetStreamSpec struct {
	// domain is the JetStream domain of every server.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]*$`
	Domain string `json:"domain,omitempty"`

	// limits caps JetStream storage. Unset limits are derived: max_memory_store
	// from 75% of resources.limits.memory, max_file_store from 95% of the
	// volume claim template's storage request.
	// +optional
	Limits *JetStreamLimits `json:"limits,omitempty"`

	// volumeClaimTemplate is the claim each server's store lives on. Without
	// it the store is an emptyDir and its data is lost when a pod restarts.
	// +optional
	VolumeClaimTemplate *VolumeClaimTemplate `json:"volumeClaimTemplate,omitempty"`

	// migration is how the streams are kept through adding or removing
	// auth, when the NatsCluster is annotated
	// cluster.nats-operator.io/restart-all=migrate-jetstream: adding auth,
	// every stream of the global account is backed up into volume, every
	// server restarted together with auth, and the streams restored, with
	// their consumers, into the account of credentials; removing auth, the
	// streams of that account are backed up with credentials and restored
	// into the global account.
	// +optional
	Migration *JetStreamMigration `json:"migration,omitempty"`
}

// JetStreamLimits are JetStream's storage limits per server.
type JetStreamLimits struct {
	// maxMemoryStore is the memory JetStream may use for streams, a
	// non-negative quantity.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!string(self).startsWith('-')",message="must not be negative"
	MaxMemoryStore *resource.Quantity `json:"maxMemoryStore,omitempty"`

	// maxFileStore is the disk JetStream may use for streams, a non-negative
	// quantity.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!string(self).startsWith('-')",message="must not be negative"
	MaxFileStore *resource.Quantity `json:"maxFileStore,omitempty"`
}

// VolumeClaimTemplate is the PersistentVolumeClaim each server gets.
type VolumeClaimTemplate struct {
	// metadata holds labels and annotations added to each claim.
	// +optional
	Metadata EmbeddedObjectMetadata `json:"metadata,omitempty"`

	// spec is the claim's spec; resources.requests.storage (required) sizes
	// it. accessModes default to [ReadWriteOnce] when absent or empty;
	// volumeMode must be Filesystem (the default).
	// +required
	// +kubebuilder:validation:XValidation:rule="has(self.resources) && has(self.resources.requests) && 'storage' in self.resources.requests",message="resources.requests.storage is required: it sizes each server's claim",fieldPath=".resources"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.requests) || self.resources.requests.all(k, k == 'storage')",message="requests may name only storage",fieldPath=".resources.requests"
	// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || self.resources.limits.all(k, k == 'storage')",message="limits may name only storage",fieldPath=".resources.limits"
	// +kubebuilder:validation:XValidation:rule="!has(self.accessModes) || !('ReadWriteOncePod' in self.accessModes) || size(self.accessModes) == 1",message="ReadWriteOncePod cannot be combined with another access mode",fieldPath=".accessModes"
	// +kubebuilder:validation:XValidation:rule="!has(self.volumeMode) || self.volumeMode == 'Filesystem'",message="must be Filesystem: the store is a mounted directory",fieldPath=".volumeMode"
	// +kubebuilder:validation:XValidation:rule="!has(self.storageClassName) || self.storageClassName == '' || self.storageClassName.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be empty or a DNS subdomain (lower case letters, digits, '-' and '.')",fieldPath=".storageClassName"
	Spec corev1.PersistentVolumeClaimSpec `json:"spec"`

	// whenDeleted says what becomes of the servers' claims when the
	// NatsCluster is deleted: Retain (the default) keeps them, as
	// StatefulSet claims always are; Delete deletes them with the cluster,
	// and with them every stream on them. It never changes a running
	// server.
	// +optional
	WhenDeleted ClaimRetention `json:"whenDeleted,omitempty"`
}

// ClaimRetention is what becomes of the claims of a deleted NatsCluster.
// +kubebuilder:validation:Enum=Retain;Delete
type ClaimRetention string

const (
	// ClaimRetain keeps the claims (the default).
	ClaimRetain ClaimRetention = "Retain"
	// ClaimDelete deletes the claims with the NatsCluster.
	ClaimDelete ClaimRetention = "Delete"
)

// EmbeddedObjectMetadata is the part of object metadata a template may set.
type EmbeddedObjectMetadata struct {
	// labels are added to the object; keys and values must be valid
	// Kubernetes labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="label keys must be a name of at most 63 characters (letters, digits, '-', '_', '.'), optionally prefixed by a DNS subdomain and '/'"
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// annotations are added to the object; keys follow the rules of label
	// keys.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="annotation keys must be a name of at most 63 characters (letters, digits, '-', '_', '.'), optionally prefixed by a DNS subdomain and '/'"
	Annotations map[string]string `json:"annotations,omitempty"`
}

// LabelValue is the value of a Kubernetes label: empty, or at most 63
// letters, digits, '-', '_' and '.', starting and ending with a letter or
// digit.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// ResolverType is how servers in operator mode resolve account JWTs.
// +kubebuilder:validation:Enum=Full;Cache;Memory
type ResolverType string

const (
	// ResolverFull keeps every account JWT in a directory on the data volume.
	ResolverFull ResolverType = "Full"
	// ResolverCache keeps account JWTs in a bounded cache on the data volume.
	ResolverCache ResolverType = "Cache"
	// ResolverMemory keeps only the accounts of accountTrustRefs, in memory:
	// servers fetch no account from each other, and an account pushed to
	// them (nsc push) lasts until the server restarts. With nats-server 2.15
	// it is the only resolver under which a config reload keeps accounts
	// working, so every day-2 change that reloads without auth reloads with
	// it too; with Full or Cache they restart the servers.
	ResolverMemory ResolverType = "Memory"
)

// AuthSpec runs the servers in operator mode.
type AuthSpec struct {
	// trustRef names the NatsOperatorTrust, in the same namespace, whose NATS
	// operator JWT and system account JWT the servers trust.
	// +required
	TrustRef LocalObjectReference `json:"trustRef"`

	// systemCredentials is a user of the system account, used by the
	// controller for $SYS actions (reload, peer removal, stepdown).
	// +optional
	SystemCredentials *SystemCredentials `json:"systemCredentials,omitempty"`

	// resolver is how servers resolve account JWTs: Full (default) keeps them
	// in a directory on the data volume, Cache in a bounded cache, Memory
	// holds only the accounts of accountTrustRefs (and is the one with which
	// tags, raised limits, certificates and accounts reload instead of
	// restarting the servers).
	// +optional
	// +kubebuilder:default=Full
	Resolver ResolverType `json:"resolver,omitempty"`

	// accountTrustRefs name NatsAccountTrusts, in the same namespace, whose
	// JWTs every server preloads.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	AccountTrustRefs []LocalObjectReference `json:"accountTrustRefs,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SystemCredentials points at a creds file of a system account user.
type SystemCredentials struct {
	// secretKeyRef is the Secret key holding the creds file.
	// +required
	SecretKeyRef SecretKeySelector `json:"secretKeyRef"`
}

// SecretKeySelector selects a key of a Secret in the same namespace.
type SecretKeySelector struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key within the Secret, default user.creds.
	// +optional
	// +kubebuilder:default="user.creds"
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key,omitempty"`
}

// RolloutSpec controls how changes reach the servers.
type RolloutSpec struct {
	// paused, when true, starts no further step; a step in flight completes.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// acceptQuorumLoss, when true, lets a restart go although the restarted
	// server's absence leaves a Raft group without a majority of current
	// members (the JetStream meta group of a 2-server cluster, an R2 stream
	// or consumer): that group stops taking writes until the server is
	// back. When false (the default) such a step holds with
	// QuorumLossOnRestart, naming the groups, until force-step names the
	// server. status.jetstream.faultTolerance says how many servers the
	// cluster can lose now.
	// +optional
	AcceptQuorumLoss bool `json:"acceptQuorumLoss,omitempty"`
}

// NatsClusterStatus is what the controller last observed and did.
type NatsClusterStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready, Settled and Progressing.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// version is set once every server reports the same version.
	// +optional
	Version string `json:"version,omitempty"`

	// replicas is the number of servers.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of servers whose pod is Ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// endpoints are where clients and monitoring reach the cluster.
	// +optional
	Endpoints *Endpoints `json:"endpoints,omitempty"`

	// config is the revision the cluster converged to, and how.
	// +optional
	Config *ConfigStatus `json:"config,omitempty"`

	// systemAccess is how the controller reaches the system account
	// ($SYS), and which operations that enables.
	// +optional
	SystemAccess *SystemAccessStatus `json:"systemAccess,omitempty"`

	// rollout is present while a rollout is in flight or held.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// removals are the servers being removed (beyond spec.replicas) or
	// replaced, with the phase each is in (one at a time).
	// +optional
	// +listType=atomic
	Removals []ServerRemoval `json:"removals,omitempty"`

	// jetstream is what JetStream reports.
	// +optional
	JetStream *JetStreamStatus `json:"jetstream,omitempty"`

	// servers are the servers as they report themselves.
	// +optional
	// +listType=map
	// +listMapKey=name
	Servers []ServerStatus `json:"servers,omitempty"`
}

// Endpoints are the cluster's addresses.
type Endpoints struct {
	// client is the URL clients connect to, nats://<name>.<ns>.svc:4222.
	// +optional
	Client string `json:"client,omitempty"`
	// monitor is the monitoring URL, http://<name>-headless.<ns>.svc:8222.
	// +optional
	Monitor string `json:"monitor,omitempty"`
}

// ConfigAppliedBy says how a config revision reached the servers.
type ConfigAppliedBy string

const (
	// AppliedByRestart means the servers were restarted onto the revision.
	AppliedByRestart ConfigAppliedBy = "Restart"
	// AppliedByReload means the servers reloaded the revision in place.
	AppliedByReload ConfigAppliedBy = "Reload"
)

// ConfigStatus is the revision the cluster converged to.
type ConfigStatus struct {
	// revision is the config revision every server runs.
	// +optional
	Revision string `json:"revision,omitempty"`
	// appliedBy is Restart or Reload.
	// +optional
	AppliedBy ConfigAppliedBy `json:"appliedBy,omitempty"`
	// restartReason says why the last restart was needed, or, while a
	// rollout restarts servers, why this one is (from its first step on;
	// revision and appliedBy change only when it is done).
	// +optional
	RestartReason string `json:"restartReason,omitempty"`
}

// SystemAccessVia is whose system account user the controller connects
// to $SYS with.
// +kubebuilder:validation:Enum=ControllerUser;MintedUser;SystemCredentials;None
type SystemAccessVia string

const (
	// SystemAccessControllerUser: the controller's own system user, an
	// nkey user every server of a cluster without spec.auth runs.
	SystemAccessControllerUser SystemAccessVia = "ControllerUser"
	// SystemAccessMintedUser: a short-lived user the controller minted
	// with the NatsOperatorTrust's spec.systemAccountSigningKey.
	SystemAccessMintedUser SystemAccessVia = "MintedUser"
	// SystemAccessSystemCredentials: the creds file of
	// spec.auth.systemCredentials.
	SystemAccessSystemCredentials SystemAccessVia = "SystemCredentials"
	// SystemAccessNone: no way in yet (message says why and what gives one).
	SystemAccessNone SystemAccessVia = "None"
)

// SystemOperation is an operation the controller carries out over $SYS.
// +kubebuilder:validation:Enum=Reload;ScaleDown;ReplaceServer
type SystemOperation string

const (
	// SystemOperationReload: config changes that reload
	// ($SYS.REQ.SERVER.<id>.RELOAD); without $SYS they restart.
	SystemOperationReload SystemOperation = "Reload"
	// SystemOperationScaleDown: moving a removed server's replicas
	// ($JS.API.SERVER.EVACUATE) and removing its JetStream peer; without
	// $SYS a scale-down holds.
	SystemOperationScaleDown SystemOperation = "ScaleDown"
	// SystemOperationReplaceServer: replace-server and storage
	// replacement, which move the server's replicas first; without $SYS
	// they hold.
	SystemOperationReplaceServer SystemOperation = "ReplaceServer"
)

// SystemOperations are the operations $SYS access enables, in order.
var SystemOperations = []SystemOperation{SystemOperationReload, SystemOperationScaleDown, SystemOperationReplaceServer}

// SystemAccessStatus is how the controller reaches $SYS.
type SystemAccessStatus struct {
	// via is ControllerUser, MintedUser, SystemCredentials or None.
	// +optional
	Via SystemAccessVia `json:"via,omitempty"`
	// operations are the operations the controller can carry out over
	// $SYS now; empty while it cannot reach it.
	// +optional
	// +listType=atomic
	Operations []SystemOperation `json:"operations,omitempty"`
	// message says why the controller cannot reach $SYS yet, and what
	// gives it access; empty when it can.
	// +optional
	Message string `json:"message,omitempty"`
}

// RemovalPhase is how far the removal of a server went.
// +kubebuilder:validation:Enum=Evacuating;SteppingDown;Stopping;RemovingPeer;Deleting;Rejoining
type RemovalPhase string

const (
	// RemovalEvacuating: its stream and consumer replicas move to the other
	// servers ($JS.API.SERVER.EVACUATE).
	RemovalEvacuating RemovalPhase = "Evacuating"
	// RemovalSteppingDown: it leads the JetStream meta group and hands over.
	RemovalSteppingDown RemovalPhase = "SteppingDown"
	// RemovalStopping: its StatefulSet is scaled to 0.
	RemovalStopping RemovalPhase = "Stopping"
	// RemovalRemovingPeer: it is removed from the JetStream meta group
	// ($JS.API.SERVER.REMOVE).
	RemovalRemovingPeer RemovalPhase = "RemovingPeer"
	// RemovalDeleting: its ConfigMap, PersistentVolumeClaim and StatefulSet
	// are deleted.
	RemovalDeleting RemovalPhase = "Deleting"
	// RemovalRejoining: a replaced server was created again, empty, and
	// is rejoining the JetStream meta group and catching up.
	RemovalRejoining RemovalPhase = "Rejoining"
)

// ServerRemoval is a server being removed.
type ServerRemoval struct {
	// server is the server's name, e.g. demo-4.
	Server string `json:"server"`
	// phase is the phase it is in.
	Phase RemovalPhase `json:"phase"`
	// replace says the server is created again, empty, once removed.
	// +optional
	Replace bool `json:"replace,omitempty"`
}

// RolloutStatus is a rollout in flight or held.
type RolloutStatus struct {
	// targetRevision is the revision the rollout moves to.
	// +optional
	TargetRevision string `json:"targetRevision,omitempty"`
	// updated are the servers already on the target revision.
	// +optional
	// +listType=atomic
	Updated []string `json:"updated,omitempty"`
	// current is the server being stepped.
	// +optional
	Current string `json:"current,omitempty"`
	// pending are the servers still to step, in the order they will go.
	// +optional
	// +listType=atomic
	Pending []string `json:"pending,omitempty"`
	// gate is what the next step waits for.
	// +optional
	Gate *Gate `json:"gate,omitempty"`
	// restartReason says why this rollout restarts servers rather than
	// reloading their config: the change that only a restart applies, a
	// reload nats-server refused or did not confirm in time, or the field
	// that would enable reloads. It becomes status.config.restartReason.
	// +optional
	RestartReason string `json:"restartReason,omitempty"`
}

// Gate is the condition the next step waits for.
type Gate struct {
	// waitingFor names the first closed check: Observed, Settled,
	// MetaMembership, PodsReady or TargetRevision.
	// +optional
	WaitingFor string `json:"waitingFor,omitempty"`
	// since is when the gate was first seen closed on this check.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// JetStreamStatus is what JetStream reports.
type JetStreamStatus struct {
	// metaLeader is the server leading the JetStream meta group.
	// +optional
	MetaLeader string `json:"metaLeader,omitempty"`
	// limits are the limits rendered into every server's config. A derived
	// limit that is not a whole number of MiB is shown rounded down to one
	// (972Mi for 95% of a 1Gi claim, whose config says 1020054732 bytes), so
	// that it reads as a Kubernetes quantity; limits set in spec are shown
	// as given.
	// +optional
	Limits *JetStreamLimits `json:"limits,omitempty"`
	// store is where each server keeps its JetStream store:
	// PersistentVolumeClaim (jetstream.volumeClaimTemplate; it survives
	// restarts) or Ephemeral (an emptyDir: a restarted server starts empty,
	// so a rollout holds with DataLossOnRestart before restarting a server
	// that holds the only current copy of a stream or consumer).
	// +optional
	Store JetStreamStore `json:"store,omitempty"`
	// faultTolerance is how many servers the cluster can lose now with
	// every replicated Raft group (the meta group, each stream and consumer
	// of more than one replica) keeping a majority of current members; set
	// while the cluster is observed.
	// +optional
	FaultTolerance *FaultTolerance `json:"faultTolerance,omitempty"`
}

// FaultTolerance is how many servers the cluster, and its least tolerant
// Raft groups, can lose now.
type FaultTolerance struct {
	// servers is how many servers may stop with every replicated group
	// still writable: the least of its groups' figures, 0 when a restart
	// of some member stops a group's writes.
	// +required
	Servers int32 `json:"servers"`
	// groups are the least tolerant groups (at most 5, lowest first, the
	// meta group always among them), e.g. {group: "stream $G/ORDERS",
	// replicas: 2, current: 2, faultTolerance: 0}.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=6
	Groups []GroupFaultTolerance `json:"groups,omitempty"`
}

// GroupFaultTolerance is one Raft group's fault tolerance.
type GroupFaultTolerance struct {
	// group names it: "meta", "stream <account>/<name>" or "consumer
	// <account>/<stream>/<name>".
	// +required
	Group string `json:"group"`
	// replicas is how many servers hold a replica.
	// +required
	Replicas int32 `json:"replicas"`
	// current is how many replicas are current in the leader's view.
	// +required
	Current int32 `json:"current"`
	// faultTolerance is how many of its current members may stop with a
	// majority left: current - (replicas/2 + 1), never below 0.
	// +required
	FaultTolerance int32 `json:"faultTolerance"`
}

// JetStreamStore is where a server's JetStream store lives.
// +kubebuilder:validation:Enum=PersistentVolumeClaim;Ephemeral
type JetStreamStore string

const (
	// StorePersistentVolumeClaim: each server's store is on its own claim.
	StorePersistentVolumeClaim JetStreamStore = "PersistentVolumeClaim"
	// StoreEphemeral: each server's store is an emptyDir, lost on restart.
	StoreEphemeral JetStreamStore = "Ephemeral"
)

// ServerStatus is one server as it reports itself.
type ServerStatus struct {
	// name of the server, e.g. demo-0.
	// +required
	Name string `json:"name"`
	// version the server reports.
	// +optional
	Version string `json:"version,omitempty"`
	// ready is whether the server's pod is Ready.
	// +optional
	Ready bool `json:"ready"`
	// configRevision is the config revision the server itself reports.
	// +optional
	ConfigRevision string `json:"configRevision,omitempty"`
	// gateways are the clusters of the supercluster this server has an
	// outbound gateway connection to, as its /gatewayz reports (with
	// spec.gateway).
	// +optional
	// +listType=atomic
	Gateways []string `json:"gateways,omitempty"`
	// leafnodes are the servers this server has a leaf connection to, as
	// a leaf of them (with spec.leafnodes.remotes), as its /leafz reports.
	// +optional
	// +listType=atomic
	Leafnodes []string `json:"leafnodes,omitempty"`
	// startProblem says why the server's container cannot start or keeps
	// crashing, as its pod reports it: "ErrImagePull: ...",
	// "CrashLoopBackOff: exit code 1: <the server's last log line>".
	// +optional
	StartProblem string `json:"startProblem,omitempty"`
}

// NatsClusterList is a list of NatsClusters.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type NatsClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the NatsClusters.
	Items []NatsCluster `json:"items"`
}

// JetStreamMigration is where a migration's backup goes and which account
// the streams are restored into.
type JetStreamMigration struct {
	// volume is the PersistentVolumeClaim the backup is written to (under
	// subPath, default <name>-migration).
	// +required
	Volume BackupVolume `json:"volume"`

	// credentials are the creds file of a user of the account the streams
	// are restored into (adding auth) or backed up from (removing it),
	// from a Secret of this namespace.
	// +required
	Credentials SecretKeySelector `json:"credentials"`
}
