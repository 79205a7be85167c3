package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Default ports of the WebSocket and MQTT listeners, as the nats helm chart
// has them.
const (
	DefaultWebSocketPort int32 = 8080
	DefaultMQTTPort      int32 = 1883
)

// WebSocketSpec is nats-server's WebSocket listener: NATS clients (nats.go's
// ws:// and wss:// URLs, nats.ws in a browser) connect over WebSocket to
// every server's port, on the pods and both Services ("websocket").
// +kubebuilder:validation:XValidation:rule="!has(self.allowedOrigins) || size(self.allowedOrigins) == 0 || !has(self.sameOrigin) || !self.sameOrigin",message="sameOrigin and allowedOrigins are exclusive: nats-server checks one or the other",fieldPath=".allowedOrigins"
type WebSocketSpec struct {
	// port is the WebSocket port, 8080 unless set. It must differ from the
	// servers' other ports (4222, 6222, 7222, 7422, 7777, 8222 and MQTT's).
	// +optional
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// noTLS serves plain ws:// for a proxy in front of the servers that
	// terminates TLS. Without it the listener serves wss:// with the client
	// certificate (spec.tls, which is then required).
	// +optional
	NoTLS bool `json:"noTLS,omitempty"`

	// sameOrigin refuses a browser whose Origin header is not the host it
	// connected to.
	// +optional
	SameOrigin bool `json:"sameOrigin,omitempty"`

	// allowedOrigins are the only Origins accepted (scheme://host[:port]),
	// for browsers; clients that send no Origin header are not affected.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^https?://[^\s"',\\]+$`
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`

	// compression offers per-message deflate to clients that ask for it.
	// +optional
	Compression bool `json:"compression,omitempty"`
}

// MQTTSpec is nats-server's MQTT listener (MQTT 3.1.1; QoS 0, 1 and 2). It
// needs JetStream: nats-server keeps MQTT sessions, retained messages and
// QoS 1 and 2 messages in streams and consumers of each client's account
// ($MQTT_sess, $MQTT_msgs, $MQTT_rmsgs, $MQTT_qos2in and their consumers),
// replicated like any other (on the servers, up to 3: the controller sets
// nats-server's stream_replicas) and gated like any other during a rollout.
type MQTTSpec struct {
	// port is the MQTT port, 1883 unless set. It must differ from the
	// servers' other ports (4222, 6222, 7222, 7422, 7777, 8222 and
	// WebSocket's).
	// +optional
	// +kubebuilder:default=1883
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// noTLS serves MQTT over plain TCP. Without it the listener requires TLS
	// with the client certificate (spec.tls, which is then required).
	// +optional
	NoTLS bool `json:"noTLS,omitempty"`

	// ackWait is how long the server waits for a QoS 1 or 2 message's
	// acknowledgement before it sends it again, 30s unless set.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="ackWait must be between 1s and 24h"
	AckWait *metav1.Duration `json:"ackWait,omitempty"`

	// maxAckPending is how many QoS 1 or 2 messages a subscription may have
	// unacknowledged, 1024 unless set (at most 65535).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	MaxAckPending *int32 `json:"maxAckPending,omitempty"`
}

// MonitoringSpec is the servers' monitoring port (8222): /varz, /jsz,
// /healthz and the rest, which the controller, the probes, the metrics
// exporter and kubectl nats read.
type MonitoringSpec struct {
	// tls serves the monitoring port as HTTPS only, with the client
	// certificate (spec.tls, which is then required): nats-server has one
	// TLS configuration for clients and monitoring, so monitoring cannot
	// have a certificate of its own. Monitoring never asks for a client
	// certificate, even with spec.tls.verifyClients. The controller
	// verifies the certificate against the client CA (the Secret's caKey,
	// or the issuer's ca.crt) for the client Service's name. Turning it on
	// or off restarts the servers one at a time.
	// +optional
	TLS bool `json:"tls,omitempty"`
}
