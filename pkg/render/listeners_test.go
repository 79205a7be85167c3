package render_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

func clientTLSSecret(nc *clusterv1beta1.NatsCluster) {
	nc.Spec.TLS = &clusterv1beta1.ClientTLS{Secret: &clusterv1beta1.TLSSecretRef{Name: "demo-client", CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt"}}
}

var clientFiles = &render.TLSFiles{Secret: "demo-client", CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt", Digest: "c1"}

// spec.websocket and spec.mqtt render blocks nats-server loads, with the
// client certificate, on the pod, both Services and the NetworkPolicy's
// client rule; spec.monitoring.tls serves the monitoring port as HTTPS.
func TestWebSocketMQTTAndMonitoringTLSLoadInNatsServer(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.JetStream(), clientTLSSecret)
	nc.Spec.WebSocket = &clusterv1beta1.WebSocketSpec{Port: 8443, AllowedOrigins: []string{"https://b.example.com", "https://a.example.com"}, Compression: true}
	nc.Spec.MQTT = &clusterv1beta1.MQTTSpec{Port: 8883, AckWait: &metav1.Duration{Duration: 45 * time.Second}, MaxAckPending: new(int32(100))}
	nc.Spec.Monitoring = &clusterv1beta1.MonitoringSpec{TLS: true}
	out, err := render.Render(render.Input{Cluster: nc, TLS: render.TLS{Client: clientFiles}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Servers {
		o := loadRenderedWithTLSFiles(t, s.Config, render.ClientTLSDir)
		ws, mq := o.Websocket, o.MQTT
		if ws.Port != 8443 || ws.TLSConfig == nil || ws.NoTLS || !ws.Compression || !slices.Equal(ws.AllowedOrigins, []string{"https://a.example.com", "https://b.example.com"}) {
			t.Errorf("%s: nats-server reads websocket %+v", s.Name, ws)
		}
		if mq.Port != 8883 || mq.TLSConfig == nil || mq.AckWait != 45*time.Second || mq.MaxAckPending != 100 || mq.StreamReplicas != 3 {
			t.Errorf("%s: nats-server reads mqtt port %d TLS %t ack wait %v max ack pending %d", s.Name, mq.Port, mq.TLSConfig != nil, mq.AckWait, mq.MaxAckPending)
		}
		if o.HTTPSPort != int(render.MonitorPort) || o.HTTPPort != 0 {
			t.Errorf("%s: nats-server reads https %d http %d", s.Name, o.HTTPSPort, o.HTTPPort)
		}
		f := s.Facts
		if f.WebSocket == "" || f.MQTT == "" || f.MQTTDelivery != "ack_wait=45s max_ack_pending=100 stream_replicas=3" || !f.MonitorTLS {
			t.Errorf("%s: facts %+v", s.Name, f)
		}
		var ports []string
		for _, p := range s.StatefulSet.Spec.Template.Spec.Containers[0].Ports {
			ports = append(ports, p.Name)
		}
		if !slices.Contains(ports, render.WebSocketPortName) || !slices.Contains(ports, render.MQTTPortName) {
			t.Errorf("%s: container ports %v", s.Name, ports)
		}
	}
	for _, svc := range []*corev1.Service{out.ClientService, out.HeadlessService} {
		var got []string
		for _, p := range svc.Spec.Ports {
			if p.Name == render.WebSocketPortName || p.Name == render.MQTTPortName {
				got = append(got, p.Name+"="+p.TargetPort.String())
				if p.Port != 8443 && p.Port != 8883 {
					t.Errorf("%s: port %s is %d", svc.Name, p.Name, p.Port)
				}
			}
		}
		if !slices.Equal(got, []string{"websocket=websocket", "mqtt=mqtt"}) {
			t.Errorf("%s: listener ports %v", svc.Name, got)
		}
	}
	np := render.NetworkPolicy(nc, "nats-operator")
	var clientRule []string
	for _, p := range np.Spec.Ingress[0].Ports {
		clientRule = append(clientRule, p.Port.String())
	}
	if !slices.Equal(clientRule, []string{"client", "websocket", "mqtt"}) || len(np.Spec.Ingress[0].From) != 1 ||
		np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels[render.NamespaceNameLabel] != "ns" {
		t.Errorf("the client rule admits %v from %+v", clientRule, np.Spec.Ingress[0].From)
	}

	// Without TLS: ws:// with no_tls, MQTT over plain TCP, monitoring http.
	nc = rt.NewCluster("ns", "demo", rt.JetStream())
	nc.Spec.WebSocket = &clusterv1beta1.WebSocketSpec{Port: 8080, NoTLS: true, SameOrigin: true}
	nc.Spec.MQTT = &clusterv1beta1.MQTTSpec{Port: 1883, NoTLS: true}
	out, err = render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	o := loadRendered(t, out.Servers[0].Config)
	if !o.Websocket.NoTLS || o.Websocket.TLSConfig != nil || !o.Websocket.SameOrigin || o.MQTT.TLSConfig != nil || o.MQTT.Port != 1883 || o.HTTPPort != int(render.MonitorPort) {
		t.Errorf("nats-server reads websocket %+v, mqtt port %d TLS %t, http %d", o.Websocket, o.MQTT.Port, o.MQTT.TLSConfig != nil, o.HTTPPort)
	}
}

// What the CRD refuses is refused for a stored object too, with the field.
func TestListenersThatCannotWorkAreRefusedWithTheirField(t *testing.T) {
	tests := []struct {
		name  string
		opt   rt.ClusterOption
		field string
	}{
		{"websocket without client TLS or noTLS", func(nc *clusterv1beta1.NatsCluster) {
			nc.Spec.WebSocket = &clusterv1beta1.WebSocketSpec{Port: 8080}
		}, "spec.websocket"},
		{"mqtt without JetStream", func(nc *clusterv1beta1.NatsCluster) {
			nc.Spec.JetStream = nil
			nc.Spec.MQTT = &clusterv1beta1.MQTTSpec{Port: 1883, NoTLS: true}
		}, "spec.mqtt"},
		{"websocket on the client port", func(nc *clusterv1beta1.NatsCluster) {
			nc.Spec.WebSocket = &clusterv1beta1.WebSocketSpec{Port: 4222, NoTLS: true}
		}, "spec.websocket.port"},
		{"websocket and mqtt on one port", func(nc *clusterv1beta1.NatsCluster) {
			nc.Spec.WebSocket = &clusterv1beta1.WebSocketSpec{Port: 9000, NoTLS: true}
			nc.Spec.MQTT = &clusterv1beta1.MQTTSpec{Port: 9000, NoTLS: true}
		}, "spec.mqtt.port"},
		{"monitoring TLS without client TLS", func(nc *clusterv1beta1.NatsCluster) {
			nc.Spec.Monitoring = &clusterv1beta1.MonitoringSpec{TLS: true}
		}, "spec.monitoring.tls"},
		{"one JetStream server in a supercluster", func(nc *clusterv1beta1.NatsCluster) {
			nc.Spec.Replicas = 1
			rt.Gateway(rt.GatewayTo("west", "west"))(nc)
		}, "spec.replicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo", rt.JetStream(), tt.opt)})
			var se *render.SpecError
			if !errors.As(err, &se) || se.Field != tt.field {
				t.Fatalf("rendered or failed otherwise: %v, want a SpecError on %s", err, tt.field)
			}
			t.Logf("refused: %v", se)
		})
	}
}

// One server with JetStream renders no cluster block: nats-server runs it
// standalone (with the block, naming only itself, it waits for JetStream
// meta peers forever). Its facts have no cluster name, so becoming three
// servers is a change the planner classifies.
func TestOneJetStreamServerRunsStandalone(t *testing.T) {
	out, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "solo", rt.JetStream(), rt.Replicas(1))})
	if err != nil {
		t.Fatal(err)
	}
	o := loadRendered(t, out.Servers[0].Config)
	if o.Cluster.Name != "" || o.Cluster.Port != 0 || len(o.Routes) != 0 || !o.JetStream {
		t.Errorf("nats-server reads cluster %q port %d, %d routes, JetStream %t", o.Cluster.Name, o.Cluster.Port, len(o.Routes), o.JetStream)
	}
	if f := out.Servers[0].Facts; f.ClusterName != "" || f.RouteTLS {
		t.Errorf("facts: cluster name %q, route TLS %t", f.ClusterName, f.RouteTLS)
	}
	three, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "solo", rt.JetStream())})
	if err != nil {
		t.Fatal(err)
	}
	if f := three.Servers[0].Facts; f.ClusterName != "solo" {
		t.Errorf("three servers: cluster name %q", f.ClusterName)
	}
	// Without JetStream one server keeps its cluster block, as before.
	plain, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "solo", rt.Replicas(1))})
	if err != nil {
		t.Fatal(err)
	}
	if o := loadRendered(t, plain.Servers[0].Config); o.Cluster.Name != "solo" {
		t.Errorf("one server without JetStream: cluster %q", o.Cluster.Name)
	}
}
