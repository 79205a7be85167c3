package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/pki"
	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/test/framework"
)

var nsMonitoringTLS = framework.SharedNamespace("monitoring-tls")

// withMonitoringTLS sets spec.monitoring.tls.
func withMonitoringTLS(o *unstructured.Unstructured) {
	if o.GetKind() == "NatsCluster" {
		withClientTLS(o)
		_ = unstructured.SetNestedField(o.Object, true, "spec", "monitoring", "tls")
	}
}

// httpsClient verifies the monitoring port's certificate under ca for
// name, whatever address it dials.
func httpsClient(ca []byte, name string) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12},
	}}
}

// varzOver GETs /varz of the pod at ip with client over scheme and returns
// its server name and version.
func varzOver(client *http.Client, scheme, ip string) (name, version string, err error) {
	resp, err := client.Get(scheme + "://" + ip + ":8222/varz")
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("%s: %q", resp.Status, strings.TrimSpace(string(body)))
	}
	var v struct {
		Name    string `json:"server_name"`
		Version string `json:"version"`
	}
	err = json.Unmarshal(body, &v)
	return v.Name, v.Version, err
}

// checkMonitoringHTTPSOnly checks every server's monitoring port answers
// HTTPS verified against ca for the client Service's name, on version,
// and refuses plain HTTP and a client with another CA; and that every
// pod's probes ask over HTTPS.
func checkMonitoringHTTPSOnly(ctx context.Context, t *testing.T, s *framework.Stack, ca, otherCA []byte, version string) {
	t.Helper()
	good, bad := httpsClient(ca, clientName(s.NS)), httpsClient(otherCA, clientName(s.NS))
	plain := &http.Client{Timeout: 5 * time.Second}
	for _, srv := range servers {
		pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, srv+"-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip := pod.Status.PodIP
		name, v, err := varzOver(good, "https", ip)
		if err != nil || name != srv || v != version {
			t.Errorf("%s: https /varz verified against the client CA: %q %q %v; want %s on %s", srv, name, v, err, srv, version)
		} else {
			t.Logf("%s: https://%s:8222/varz verified for %s: server %s, version %s", srv, ip, clientName(s.NS), name, v)
		}
		if _, _, err := varzOver(plain, "http", ip); err == nil {
			t.Errorf("%s: plain http /varz answered", srv)
		} else {
			t.Logf("%s: plain http /varz refused: %v", srv, err)
		}
		if _, _, err := varzOver(bad, "https", ip); err == nil || !strings.Contains(err.Error(), "unknown authority") {
			t.Errorf("%s: https /varz with another CA: %v, want unknown authority", srv, err)
		}
		for _, c := range pod.Spec.Containers {
			if c.Name != render.ContainerName {
				continue
			}
			for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
				if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
					t.Errorf("%s: probe %+v, want HTTPS", srv, p)
				}
			}
		}
	}
}

// checkHTTPSExporters scrapes every server's exporter: it read /varz and
// /jsz over HTTPS (https://demo.<ns>.svc:8222, its host alias, verified
// with SSL_CERT_FILE).
func checkHTTPSExporters(ctx context.Context, t *testing.T, s *framework.Stack) {
	t.Helper()
	for _, srv := range servers {
		pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, srv+"-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		url := fmt.Sprintf("http://%s:%d/metrics", pod.Status.PodIP, render.MetricsPort)
		poll.Eventually(t, time.Minute, 500*time.Millisecond, "the exporter of "+srv, func() error {
			_, body, err := framework.Get(url)
			if err != nil {
				return err
			}
			conns, ok1 := framework.SumMetric(body, "gnatsd_varz_connections", `server_id="`+srv+`"`)
			store, ok2 := framework.SumMetric(body, "jetstream_server_max_storage", `server_name="`+srv+`"`)
			if !ok1 || !ok2 || store <= 0 {
				return fmt.Errorf("%s: connections %v (%v), max storage %v (%v)", url, conns, ok1, store, ok2)
			}
			t.Logf("%s: gnatsd_varz_connections %v, jetstream_server_max_storage %v (read over HTTPS)", url, conns, store)
			return nil
		})
	}
}

// A cluster with spec.monitoring.tls: the monitoring port answers only
// HTTPS, verified against the client CA for the client Service's name (a
// plain GET and another CA fail); the probes ask over HTTPS; the metrics
// exporter reads it, verifying, and exports every server's metrics; the
// controller observes it (Settled) and rolls a version change through
// it; kubectl nats status shows every server answering; and
// status.endpoints.monitor says https.
func TestMonitoringOverTLS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsMonitoringTLS)
	s.CreateNamespace(ctx, t, s.NS)
	ca := clientTLSSecret(ctx, t, s)
	other, err := pki.NewCA("another CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	nc := settledCluster(ctx, t, s, "2.15.1", withMonitoringTLS)
	if got, want := nc.Status.Endpoints.Monitor, "https://demo-headless."+s.NS+".svc:8222"; got != want {
		t.Errorf("status.endpoints.monitor %q, want %q", got, want)
	}
	checkMonitoringHTTPSOnly(ctx, t, s, ca.Cert, other.Cert, "2.15.1")
	checkHTTPSExporters(ctx, t, s)

	k := buildPlugin(t, s)
	checkStatus := func(when string) {
		t.Helper()
		out, code := k.run(ctx, t, "status", "demo", "-o", "json")
		var v struct {
			Observed bool `json:"observed"`
			Servers  []struct {
				Name     string `json:"name"`
				Answered bool   `json:"answered"`
			} `json:"servers"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
			t.Fatalf("kubectl nats status -o json %s: exit %d, %v\n%s", when, code, err, out)
		}
		answered := 0
		for _, srv := range v.Servers {
			if srv.Answered {
				answered++
			}
		}
		if answered != len(servers) {
			t.Errorf("kubectl nats status %s: %d of %d servers answered over HTTPS:\n%s", when, answered, len(servers), out)
		}
		screen, _ := k.run(ctx, t, "status", "demo")
		t.Logf("kubectl nats status demo %s:\n%s", when, screen)
	}
	checkStatus("before the upgrade")

	start := time.Now()
	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.2"}}`)
	// The controller sees the rollout start, then settles it.
	poll.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the rollout to start", func() error {
		pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, "demo-2-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, st := range pod.Status.ContainerStatuses {
			if st.Name == render.ContainerName && strings.Contains(st.Image, "2.15.2") {
				return nil
			}
		}
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if r := nc.Status.Rollout; r != nil && len(r.Updated) > 0 {
			return nil
		}
		return fmt.Errorf("no server updated yet: %s", framework.Conditions(nc))
	})
	nc = s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 5*time.Minute)
	t.Logf("rolled to 2.15.2 and Settled after %s: %s", time.Since(start).Round(time.Millisecond), framework.Conditions(nc))
	if nc.Status.Version != "2.15.2" {
		t.Errorf("status.version %q after the upgrade", nc.Status.Version)
	}
	checkMonitoringHTTPSOnly(ctx, t, s, ca.Cert, other.Cert, "2.15.2")
	checkStatus("after the upgrade")
}
