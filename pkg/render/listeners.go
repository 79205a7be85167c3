package render

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Port names of the WebSocket and MQTT listeners on the pods and Services.
const (
	WebSocketPortName = "websocket"
	MQTTPortName      = "mqtt"
)

// reservedPorts are the ports every server has whatever the spec says: a
// WebSocket or MQTT port must be none of them.
var reservedPorts = []int32{ClientPort, ClusterPort, clusterv1beta1.GatewayPort, LeafNodePort, MetricsPort, MonitorPort}

// websocketConfig is nats.conf's websocket block.
type websocketConfig struct {
	Port           int32      `json:"port"`
	NoTLS          bool       `json:"no_tls,omitempty"`
	TLS            *tlsConfig `json:"tls,omitempty"`
	SameOrigin     bool       `json:"same_origin,omitempty"`
	AllowedOrigins []string   `json:"allowed_origins,omitempty"`
	Compression    bool       `json:"compression,omitempty"`
}

// canonical is the block in one string for the planner's facts.
func (w *websocketConfig) canonical() string {
	return fmt.Sprintf("port=%d tls=%t same_origin=%t origins=%s compression=%t",
		w.Port, w.TLS != nil, w.SameOrigin, strings.Join(w.AllowedOrigins, ","), w.Compression)
}

// mqttConfig is nats.conf's mqtt block.
type mqttConfig struct {
	Port          int32      `json:"port"`
	TLS           *tlsConfig `json:"tls,omitempty"`
	AckWait       string     `json:"ack_wait,omitempty"`
	MaxAckPending int32      `json:"max_ack_pending,omitempty"`
	// StreamReplicas is the replicas of the MQTT streams nats-server
	// creates: left to itself it counts the routes that resolve, which
	// gave R2 on a 3-server cluster (measured by the e2e test), so a
	// rolling restart would stop their writes; here it is the servers, up
	// to 3.
	StreamReplicas int32 `json:"stream_replicas"`
}

// listener is the part of the block that a server reloads nothing of.
func (m *mqttConfig) listener() string { return fmt.Sprintf("port=%d tls=%t", m.Port, m.TLS != nil) }

// delivery is the part nats-server reloads: ack_wait, max_ack_pending and
// stream_replicas (which applies to MQTT streams created after it).
func (m *mqttConfig) delivery() string {
	return fmt.Sprintf("ack_wait=%s max_ack_pending=%d stream_replicas=%d", orDefault(m.AckWait, "default"), m.MaxAckPending, m.StreamReplicas)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// websocketOf renders spec.websocket: wss:// with the client certificate
// (the clients' own TLS block, verify included) unless noTLS.
func websocketOf(nc *clusterv1beta1.NatsCluster, tls TLS) *websocketConfig {
	ws := nc.Spec.WebSocket
	if ws == nil {
		return nil
	}
	c := &websocketConfig{
		Port:           cmpPort(ws.Port, clusterv1beta1.DefaultWebSocketPort),
		SameOrigin:     ws.SameOrigin,
		AllowedOrigins: slices.Sorted(slices.Values(ws.AllowedOrigins)),
		Compression:    ws.Compression,
	}
	if ws.NoTLS {
		c.NoTLS = true
	} else {
		c.TLS = tlsBlock(tls.Client, ClientTLSDir)
	}
	return c
}

// mqttOf renders spec.mqtt: TLS with the client certificate unless noTLS.
func mqttOf(nc *clusterv1beta1.NatsCluster, tls TLS) *mqttConfig {
	m := nc.Spec.MQTT
	if m == nil {
		return nil
	}
	c := &mqttConfig{Port: cmpPort(m.Port, clusterv1beta1.DefaultMQTTPort), StreamReplicas: min(nc.Spec.Replicas, 3)}
	if !m.NoTLS {
		c.TLS = tlsBlock(tls.Client, ClientTLSDir)
	}
	if m.AckWait != nil {
		c.AckWait = m.AckWait.Duration.String()
	}
	if m.MaxAckPending != nil {
		c.MaxAckPending = *m.MaxAckPending
	}
	return c
}

func cmpPort(p, def int32) int32 {
	if p == 0 {
		return def
	}
	return p
}

// WebSocketPort and MQTTPort are the ports of spec.websocket and spec.mqtt,
// 0 without them.
func WebSocketPort(spec *clusterv1beta1.NatsClusterSpec) int32 {
	if spec.WebSocket == nil {
		return 0
	}
	return cmpPort(spec.WebSocket.Port, clusterv1beta1.DefaultWebSocketPort)
}

// MQTTPort: see WebSocketPort.
func MQTTPort(spec *clusterv1beta1.NatsClusterSpec) int32 {
	if spec.MQTT == nil {
		return 0
	}
	return cmpPort(spec.MQTT.Port, clusterv1beta1.DefaultMQTTPort)
}

// MonitorTLS reports whether the monitoring port serves HTTPS
// (spec.monitoring.tls).
func MonitorTLS(spec *clusterv1beta1.NatsClusterSpec) bool {
	return spec.Monitoring != nil && spec.Monitoring.TLS
}

// MonitorScheme is http or https, as the monitoring port serves.
func MonitorScheme(spec *clusterv1beta1.NatsClusterSpec) string {
	if MonitorTLS(spec) {
		return "https"
	}
	return "http"
}

var originRE = regexp.MustCompile(`^https?://[^\s"',\\]+$`)

// validateStoredListeners is the CRD's rules for spec.websocket, spec.mqtt
// and spec.monitoring, for objects stored before them.
func validateStoredListeners(s *clusterv1beta1.NatsClusterSpec) error {
	bad := func(field, msg string) error { return &SpecError{Field: field, Message: msg} }
	ports := map[string]int32{}
	if ws := s.WebSocket; ws != nil {
		if !ws.NoTLS && s.TLS == nil {
			return bad("spec.websocket", "serves wss:// with the client certificate: set spec.tls, or websocket.noTLS behind a proxy that terminates TLS")
		}
		if ws.SameOrigin && len(ws.AllowedOrigins) > 0 {
			return bad("spec.websocket.allowedOrigins", "sameOrigin and allowedOrigins are exclusive")
		}
		for _, o := range ws.AllowedOrigins {
			if len(o) > 253 || !originRE.MatchString(o) {
				return bad("spec.websocket.allowedOrigins", fmt.Sprintf("%q is not an origin such as https://app.example.com", o))
			}
		}
		ports["spec.websocket.port"] = WebSocketPort(s)
	}
	if m := s.MQTT; m != nil {
		if !m.NoTLS && s.TLS == nil {
			return bad("spec.mqtt", "requires TLS with the client certificate: set spec.tls, or mqtt.noTLS for MQTT over plain TCP")
		}
		if s.JetStream == nil {
			return bad("spec.mqtt", "needs spec.jetstream: nats-server keeps MQTT sessions and QoS 1 and 2 messages in JetStream streams")
		}
		if m.MaxAckPending != nil && (*m.MaxAckPending < 1 || *m.MaxAckPending > 65535) {
			return bad("spec.mqtt.maxAckPending", "must be between 1 and 65535")
		}
		if m.AckWait != nil && (m.AckWait.Duration < 1e9 || m.AckWait.Duration > 24*3600e9) {
			return bad("spec.mqtt.ackWait", "must be between 1s and 24h")
		}
		ports["spec.mqtt.port"] = MQTTPort(s)
	}
	for field, p := range ports {
		if p < 1 || p > 65535 || slices.Contains(reservedPorts, p) {
			return bad(field, fmt.Sprintf("%d must be between 1 and 65535 and differ from the servers' other ports (4222, 6222, 7222, 7422, 7777, 8222)", p))
		}
	}
	if len(ports) == 2 && ports["spec.websocket.port"] == ports["spec.mqtt.port"] {
		return bad("spec.mqtt.port", "spec.websocket.port and spec.mqtt.port must differ")
	}
	if MonitorTLS(s) && s.TLS == nil {
		return bad("spec.monitoring.tls", "serves HTTPS with the client certificate: set spec.tls")
	}
	return nil
}

// listenerContainerPorts are the nats container's WebSocket and MQTT ports.
func listenerContainerPorts(spec *clusterv1beta1.NatsClusterSpec) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, l := range listenerPorts(spec) {
		out = append(out, corev1.ContainerPort{Name: l.name, ContainerPort: l.port, Protocol: corev1.ProtocolTCP})
	}
	return out
}

// listenerServicePorts are the Services' WebSocket and MQTT ports.
func listenerServicePorts(spec *clusterv1beta1.NatsClusterSpec) []corev1.ServicePort {
	var out []corev1.ServicePort
	for _, l := range listenerPorts(spec) {
		out = append(out, servicePort(l.name, l.port))
	}
	return out
}

// listenerPolicyPorts are the WebSocket and MQTT ports of the
// NetworkPolicy's client rule: they follow clientsFrom.
func listenerPolicyPorts(spec *clusterv1beta1.NatsClusterSpec) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	tcp := corev1.ProtocolTCP
	for _, l := range listenerPorts(spec) {
		p := intstr.FromString(l.name)
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &p})
	}
	return out
}

type namedPort struct {
	name string
	port int32
}

func listenerPorts(spec *clusterv1beta1.NatsClusterSpec) []namedPort {
	var out []namedPort
	if p := WebSocketPort(spec); p != 0 {
		out = append(out, namedPort{WebSocketPortName, p})
	}
	if p := MQTTPort(spec); p != 0 {
		out = append(out, namedPort{MQTTPortName, p})
	}
	return out
}
