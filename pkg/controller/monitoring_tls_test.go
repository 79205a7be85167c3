package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nats-operator/nats-operator/internal/pki"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

func withMonitoringTLS(nc *clusterv1beta1.NatsCluster) *clusterv1beta1.NatsCluster {
	nc.Spec.TLS = &clusterv1beta1.ClientTLS{Secret: &clusterv1beta1.TLSSecretRef{Name: "demo-client"}}
	nc.Spec.Monitoring = &clusterv1beta1.MonitoringSpec{TLS: true}
	return nc
}

func clientSecret(t *testing.T, withCA bool) *corev1.Secret {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("client CA", now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := pki.Issue(ca, "demo", []string{"demo.ns.svc"}, now)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{keyCert: leaf.Cert, keyKey: leaf.Key}
	if withCA {
		data[keyCA] = ca.Cert
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-client"}, Data: data}
}

// spec.monitoring.tls with a client Secret without its CA holds the
// cluster (CertificateNotReady, saying why) and writes no server: neither
// the controller nor the exporter could verify the monitoring port, and
// neither skips verification.
func TestMonitoringTLSNeedsTheClientCA(t *testing.T) {
	f := newFixture(t, withMonitoringTLS(rt.NewCluster("ns", "demo")), clientSecret(t, false))
	acts := writes(f.sync())
	for _, a := range describe(acts) {
		if strings.Contains(a, "statefulsets") || strings.Contains(a, "configmaps") {
			t.Errorf("action %s without the CA", a)
		}
	}
	c := conditionIn(writtenStatus(acts), clusterv1beta1.ConditionProgressing)
	if c.Reason != clusterv1beta1.ReasonCertificateNotReady || !strings.Contains(c.Message, `spec.tls.secret: Secret ns/demo-client has no key "ca.crt": spec.monitoring.tls needs the CA`) {
		t.Errorf("Progressing %s %q, want CertificateNotReady naming the missing CA", c.Reason, c.Message)
	}
}

// With the CA the servers are written and status.endpoints.monitor says
// https.
func TestMonitoringTLSEndpointIsHTTPS(t *testing.T) {
	f := newFixture(t, withMonitoringTLS(rt.NewCluster("ns", "demo")), clientSecret(t, true))
	acts := writes(f.sync())
	st := writtenStatus(acts)
	if st.Status.Endpoints == nil || st.Status.Endpoints.Monitor != "https://demo-headless.ns.svc:8222" {
		t.Errorf("endpoints %+v, want monitor https://demo-headless.ns.svc:8222", st.Status.Endpoints)
	}
	wrote := false
	for _, a := range describe(acts) {
		wrote = wrote || strings.Contains(a, "statefulsets")
	}
	if !wrote {
		t.Errorf("no StatefulSet written: %v", describe(acts))
	}
}

// The observation asks each server with the scheme its pod's probes use
// (a pod keeps its monitoring scheme for life: while a change of
// spec.monitoring.tls rolls, both kinds run), verified against the client
// CA for the client Service's name.
func TestObserveTargetAsksEachPodWithItsScheme(t *testing.T) {
	pod := func(name, ip string, scheme corev1.URIScheme) *corev1.Pod {
		probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: render.HealthzServerOnly, Port: intstr.FromInt32(render.MonitorPort), Scheme: scheme,
		}}}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + types.UID(name)},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: render.ContainerName, ReadinessProbe: probe}}},
			Status: corev1.PodStatus{PodIP: ip}}
	}
	nc := withMonitoringTLS(rt.NewCluster("ns", "demo", rt.Replicas(3)))
	f := &facts{
		nc:    nc,
		tls:   render.TLS{Client: &render.TLSFiles{Secret: "demo-client", CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt"}},
		tlsCA: []byte("the CA"),
		servers: []serverObjects{
			{name: "demo-0", pod: pod("demo-0-0", "10.0.0.1", corev1.URISchemeHTTPS)},
			{name: "demo-1", pod: pod("demo-1-0", "10.0.0.2", corev1.URISchemeHTTP)},
			{name: "demo-2"},
		},
	}
	tg := observeTarget(f)
	if string(tg.TLSRootCAs) != "the CA" || tg.TLSServerName != "demo.ns.svc" {
		t.Errorf("TLS roots %q server name %q", tg.TLSRootCAs, tg.TLSServerName)
	}
	want := map[string]bool{"demo-0": true, "demo-1": false, "demo-2": true}
	for _, a := range tg.Servers {
		if a.MonitorHTTPS != want[a.Name] {
			t.Errorf("%s: MonitorHTTPS %t, want %t", a.Name, a.MonitorHTTPS, want[a.Name])
		}
	}
	// Without spec.monitoring.tls, a pod without probes is asked over HTTP.
	nc.Spec.Monitoring = nil
	f.servers = []serverObjects{{name: "demo-0", pod: &corev1.Pod{Status: corev1.PodStatus{PodIP: "10.0.0.1"}}}}
	if a := observeTarget(f).Servers[0]; a.MonitorHTTPS {
		t.Errorf("without monitoring TLS: %+v", a)
	}
}
