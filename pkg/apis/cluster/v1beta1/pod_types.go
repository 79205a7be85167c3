package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// PodTemplate is merged over every server's rendered pod: metadata is added
// (the controller's own labels win) and spec is strategic-merged over the
// rendered pod spec, as kubectl patch --type strategic would: containers,
// volumes and env by name. What the servers need (the restricted security
// context, the nats container's image, command, ports, probes' checks and
// the controller's volumes) cannot be changed: such a template is refused
// at apply, or held with InvalidSpec naming the path.
type PodTemplate struct {
	// metadata are labels and annotations added to every server's pod.
	// +optional
	Metadata EmbeddedObjectMetadata `json:"metadata,omitempty"`

	// spec is merged over the rendered pod spec.
	// +optional
	Spec PodSpecOverride `json:"spec,omitempty"`
}

// PodSpecOverride is the part of a pod spec a podTemplate may set.
// +kubebuilder:validation:XValidation:rule="!has(self.securityContext) || !has(self.securityContext.runAsNonRoot) || self.securityContext.runAsNonRoot",message="runAsNonRoot must stay true: servers run under the restricted Pod Security Standard",fieldPath=".securityContext.runAsNonRoot"
// +kubebuilder:validation:XValidation:rule="!has(self.securityContext) || !has(self.securityContext.runAsUser) || self.securityContext.runAsUser != 0",message="runAsUser must not be 0 (root): servers run under the restricted Pod Security Standard",fieldPath=".securityContext.runAsUser"
// +kubebuilder:validation:XValidation:rule="!has(self.securityContext) || !has(self.securityContext.seccompProfile) || self.securityContext.seccompProfile.type != 'Unconfined'",message="seccompProfile must not be Unconfined: servers run under the restricted Pod Security Standard",fieldPath=".securityContext.seccompProfile.type"
// +kubebuilder:validation:XValidation:rule="!has(self.volumes) || self.volumes.all(v, !(v.name in ['config', 'data', 'pid']))",message="volumes config, data and pid are the controller's: name extra volumes otherwise",fieldPath=".volumes"
type PodSpecOverride struct {
	// containers are merged by name: "nats" over the server's container
	// (resources, env, extra volumeMounts, probe timings), "metrics" over
	// the exporter's, and any other name adds a sidecar, which must name an
	// image. A container without a securityContext gets the restricted one
	// (no privilege escalation, every capability dropped).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.name in ['nats', 'metrics'] || has(c.image))",message="a sidecar (a container other than nats and metrics) must name an image"
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.name != 'nats' || (!has(c.image) && !has(c.command) && !has(c.args)))",message="the nats container's image, command and args are the controller's: set spec.version and spec.image instead"
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.name != 'nats' || !has(c.ports))",message="the nats container's ports (client 4222, cluster 6222, monitor 8222) are the controller's and cannot be changed"
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.name != 'nats' || !has(c.lifecycle))",message="the nats container's lifecycle (lame duck mode before it stops) is the controller's"
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.name != 'nats' || ((!has(c.startupProbe) || (!has(c.startupProbe.httpGet) && !has(c.startupProbe.exec) && !has(c.startupProbe.tcpSocket) && !has(c.startupProbe.grpc))) && (!has(c.readinessProbe) || (!has(c.readinessProbe.httpGet) && !has(c.readinessProbe.exec) && !has(c.readinessProbe.tcpSocket) && !has(c.readinessProbe.grpc))) && (!has(c.livenessProbe) || (!has(c.livenessProbe.httpGet) && !has(c.livenessProbe.exec) && !has(c.livenessProbe.tcpSocket) && !has(c.livenessProbe.grpc)))))",message="the nats container's probes check what the controller relies on: only their timings (initialDelaySeconds, periodSeconds, timeoutSeconds, failureThreshold, successThreshold) may be set"
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.name != 'metrics' || (!has(c.image) && !has(c.command) && !has(c.args) && !has(c.ports)))",message="the metrics container's image (spec.metrics.image), command, args and ports are the controller's"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.securityContext) || !has(c.securityContext.privileged) || !c.securityContext.privileged)",message="privileged containers are not allowed: servers run under the restricted Pod Security Standard"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.securityContext) || !has(c.securityContext.allowPrivilegeEscalation) || !c.securityContext.allowPrivilegeEscalation)",message="allowPrivilegeEscalation must be false: servers run under the restricted Pod Security Standard"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.securityContext) || !has(c.securityContext.runAsNonRoot) || c.securityContext.runAsNonRoot)",message="runAsNonRoot must stay true: servers run under the restricted Pod Security Standard"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.securityContext) || !has(c.securityContext.runAsUser) || c.securityContext.runAsUser != 0)",message="runAsUser must not be 0 (root): servers run under the restricted Pod Security Standard"
	Containers []corev1.Container `json:"containers,omitempty"`

	// volumes are added to the pod, for the containers' extra volumeMounts;
	// config, data and pid are the controller's.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// nodeSelector must match a node's labels for a server to run there.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let servers run on tainted nodes.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity, when set, replaces the default spreading of servers across
	// nodes and zones.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// topologySpreadConstraints, when set, replace the default spreading of
	// servers across nodes and zones (as affinity does).
	// +optional
	// +listType=atomic
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// priorityClassName is the pods' priority class.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// serviceAccountName is the pods' service account (its token is not
	// mounted unless a sidecar's volume asks for it).
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// imagePullSecrets are used to pull every container's image.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// securityContext is merged over the pod's restricted one: fsGroup,
	// supplementalGroups and sysctls may be set; it cannot run as root.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
}

// DefaultExporterImage is the prometheus-nats-exporter image of the metrics
// sidecar unless spec.metrics.image names another.
const DefaultExporterImage = "natsio/prometheus-nats-exporter:0.20.1"

// MetricsSpec is the Prometheus metrics of every server.
type MetricsSpec struct {
	// enabled runs prometheus-nats-exporter next to every server (the
	// "metrics" container, port 7777 named metrics), exporting /varz,
	// /connz, /routez, /subz, /healthz and /jsz; with the PodMonitor CRD of
	// prometheus-operator installed, a PodMonitor <name> scrapes it. On by
	// default.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// image is the exporter's image.
	// +optional
	// +kubebuilder:default="natsio/prometheus-nats-exporter:0.20.1"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`
}

// NetworkPolicySpec is the NetworkPolicy <name> of the servers' pods.
type NetworkPolicySpec struct {
	// enabled renders the NetworkPolicy: the client port is open to
	// clientsFrom (by default the cluster's own namespace) and, whatever
	// clientsFrom says, to the controller's pods
	// (app.kubernetes.io/name=nats-operator in the controller's namespace),
	// which send every $SYS request there, and to the cluster's own backup
	// and restore Jobs; the WebSocket and MQTT ports to clientsFrom only;
	// the route port only to the cluster's own servers; the monitoring port
	// only to the controller's pods; and the metrics port only to
	// metricsFrom. On by default. A NetworkPolicy is enforced only by a
	// network plugin that supports it.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// clientsFrom are who may reach the client port, and the WebSocket and
	// MQTT ports; absent or empty, the pods of the cluster's own
	// namespace. Clients of other namespaces need a peer here (a
	// namespaceSelector), clients outside the Kubernetes cluster an
	// ipBlock. The controller and the cluster's backup and restore Jobs
	// are admitted to the client port whatever it says.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ClientsFrom []networkingv1.NetworkPolicyPeer `json:"clientsFrom,omitempty"`

	// metricsFrom are who may scrape the metrics port (for example the
	// namespace Prometheus runs in); absent or empty, nobody may.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	MetricsFrom []networkingv1.NetworkPolicyPeer `json:"metricsFrom,omitempty"`
}

// IsEnabled reports whether the exporter sidecar runs.
func (m MetricsSpec) IsEnabled() bool { return m.Enabled == nil || *m.Enabled }

// IsEnabled reports whether the NetworkPolicy is rendered.
func (n NetworkPolicySpec) IsEnabled() bool { return n.Enabled == nil || *n.Enabled }
