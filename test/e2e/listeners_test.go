package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/framework"
)

var nsListeners = framework.SharedNamespace("listeners")

// A 3-server cluster with client TLS from a Secret, WebSocket on 8443 and
// MQTT on 8883, both over TLS with the client certificate. A nats.go client
// over wss:// and an MQTT client (paho, QoS 1, a persistent session) publish
// and subscribe through the cluster; the subscriber's session goes away, a
// QoS 1 message is published for it, every server is restarted onto
// another version one at a time, and the message is delivered when the
// session comes back; WebSocket clients exchange messages after the
// restart on the connections they reopened.
func TestWebSocketAndMQTTAcrossARollingRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsListeners)
	ca := clientTLSSecret(ctx, t, s)
	s.ApplyExample(ctx, t, nsListeners, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			withClientTLS(o)
			_ = unstructured.SetNestedField(o.Object, "2.15.1", "spec", "version")
			_ = unstructured.SetNestedField(o.Object, int64(8443), "spec", "websocket", "port")
			_ = unstructured.SetNestedField(o.Object, int64(8883), "spec", "mqtt", "port")
		}
	})
	s.WaitSettledUpToDate(ctx, t, nsListeners, "demo", 4*time.Minute)
	var hosts []string
	for _, u := range s.PodURLs(ctx, t, nsListeners, "demo") {
		hosts = append(hosts, strings.TrimSuffix(strings.TrimPrefix(u, "nats://"), ":4222"))
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.Cert)
	tlsConfig := &tls.Config{RootCAs: pool, ServerName: clientName(nsListeners), MinVersion: tls.VersionTLS12}

	// WebSocket: two nats.go clients over wss://.
	var wsURLs []string
	for _, h := range hosts {
		wsURLs = append(wsURLs, "wss://"+h+":8443")
	}
	wsConnect := func(name string) *nats.Conn {
		nc, err := nats.Connect(strings.Join(wsURLs, ","), nats.Secure(tlsConfig), nats.Name(name), nats.MaxReconnects(-1),
			nats.ReconnectWait(200*time.Millisecond), nats.IgnoreDiscoveredServers())
		if err != nil {
			t.Fatalf("connecting over WebSocket: %v", err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	wsSub, wsPub := wsConnect("ws-sub"), wsConnect("ws-pub")
	if _, err := wsSub.Subscribe("ws.echo", func(m *nats.Msg) { _ = m.Respond(append([]byte("echo "), m.Data...)) }); err != nil {
		t.Fatal(err)
	}
	if err := wsSub.Flush(); err != nil {
		t.Fatal(err)
	}
	echo := func(when string) {
		t.Helper()
		poll.Eventually(t, time.Minute, 250*time.Millisecond, "a request over WebSocket "+when, func() error {
			m, err := wsPub.Request("ws.echo", []byte(when), 2*time.Second)
			if err != nil {
				return err
			}
			if string(m.Data) != "echo "+when {
				return fmt.Errorf("answer %q", m.Data)
			}
			return nil
		})
		t.Logf("over WebSocket %s: a request answered, publisher on %s, subscriber on %s", when, wsPub.ConnectedUrl(), wsSub.ConnectedUrl())
	}
	echo("before the restart")

	// MQTT: a QoS 1 subscriber with a persistent session.
	var brokers []string
	for _, h := range hosts {
		brokers = append(brokers, "ssl://"+h+":8883")
	}
	var mu sync.Mutex
	var got []string
	mqttClient := func(id string, handler mqtt.MessageHandler) mqtt.Client {
		o := mqtt.NewClientOptions().SetClientID(id).SetCleanSession(false).SetTLSConfig(tlsConfig).
			SetConnectTimeout(5 * time.Second).SetAutoReconnect(false).SetDefaultPublishHandler(handler)
		for _, b := range brokers {
			o.AddBroker(b)
		}
		c := mqtt.NewClient(o)
		poll.Eventually(t, time.Minute, time.Second, "MQTT client "+id+" to connect", func() error {
			tok := c.Connect()
			if !tok.WaitTimeout(10 * time.Second) {
				return fmt.Errorf("no CONNACK")
			}
			return tok.Error()
		})
		return c
	}
	record := func(_ mqtt.Client, m mqtt.Message) {
		mu.Lock()
		got = append(got, m.Topic()+"="+string(m.Payload()))
		mu.Unlock()
	}
	sub := mqttClient("e2e-subscriber", record)
	if tok := sub.Subscribe("orders/#", 1, record); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribing over MQTT: %v", tok.Error())
	}
	pub := mqttClient("e2e-publisher", nil)
	publish := func(topic, payload string) {
		t.Helper()
		if tok := pub.Publish(topic, 1, false, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publishing %s over MQTT (QoS 1): %v", topic, tok.Error())
		}
	}
	received := func(want string) {
		t.Helper()
		poll.Eventually(t, time.Minute, 200*time.Millisecond, "MQTT message "+want, func() error {
			mu.Lock()
			defer mu.Unlock()
			for _, g := range got {
				if g == want {
					return nil
				}
			}
			return fmt.Errorf("received %v", got)
		})
	}
	publish("orders/1", "while connected")
	received("orders/1=while connected")
	sub.Disconnect(250)
	publish("orders/2", "published before the restart")
	pub.Disconnect(250)
	t.Logf("the MQTT subscriber's session is away; a QoS 1 message waits for it")

	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.2"}}`)
	nc := s.WaitSettledUpToDate(ctx, t, nsListeners, "demo", 6*time.Minute)
	if nc.Status.Version != "2.15.2" {
		t.Fatalf("status.version %s, want 2.15.2", nc.Status.Version)
	}
	t.Logf("every server restarted onto 2.15.2; WebSocket reconnects: publisher %d, subscriber %d", wsPub.Reconnects, wsSub.Reconnects)
	if wsPub.Reconnects+wsSub.Reconnects == 0 {
		t.Errorf("no WebSocket client reconnected: were the servers restarted?")
	}
	echo("after the restart")

	sub = mqttClient("e2e-subscriber", record)
	defer sub.Disconnect(250)
	received("orders/2=published before the restart")
	t.Logf("the QoS 1 message published before the restart was delivered after it: %v", got)
}
