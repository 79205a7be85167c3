package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/nats-operator/nats-operator/internal/pki"
	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// clientNames are the names the client certificate is for: the client
// Service's in namespace ns.
func clientNames(ns string) []string {
	return []string{clientName(ns), clientName(ns) + ".cluster.local"}
}

// clientName is the client Service's name in namespace ns.
func clientName(ns string) string { return "demo." + ns + ".svc" }

// clientTLSSecret creates the Secret demo-client-tls with a certificate for
// clientNames under a new CA, and returns the CA.
func clientTLSSecret(ctx context.Context, t *testing.T, s *framework.Stack) pki.Pair {
	t.Helper()
	ca, err := pki.NewCA("e2e client CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	writeClientCert(ctx, t, s, ca, false)
	return ca
}

// writeClientCert issues a certificate under ca into demo-client-tls,
// updating the Secret when update.
func writeClientCert(ctx context.Context, t *testing.T, s *framework.Stack, ca pki.Pair, update bool) *x509.Certificate {
	t.Helper()
	leaf, err := pki.Issue(ca, "demo", clientNames(s.NS), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-client-tls", Namespace: s.NS},
		Data: map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": ca.Cert}}
	if update {
		_, err = s.Kube.CoreV1().Secrets(s.NS).Update(ctx, sec, metav1.UpdateOptions{})
	} else {
		_, err = s.Kube.CoreV1().Secrets(s.NS).Create(ctx, sec, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("writing Secret demo-client-tls: %v", err)
	}
	c, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := x509.ParseCertificate(c.Certificate[0])
	return x
}

// withClientTLS sets spec.tls.secret.name demo-client-tls.
func withClientTLS(o *unstructured.Unstructured) {
	_ = unstructured.SetNestedField(o.Object, "demo-client-tls", "spec", "tls", "secret", "name")
}

// tlsOption verifies the servers' client certificate under ca for name.
func tlsOption(ca []byte, name string) nats.Option {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return nats.Secure(&tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12})
}

// varzTLS is what a server's /varz says of its TLS.
type varzTLS struct {
	TLSRequired bool      `json:"tls_required"`
	TLSVerify   bool      `json:"tls_verify"`
	NotAfter    time.Time `json:"tls_cert_not_after"`
	Cluster     struct {
		TLSRequired bool      `json:"tls_required"`
		TLSVerify   bool      `json:"tls_verify"`
		NotAfter    time.Time `json:"tls_cert_not_after"`
	} `json:"cluster"`
}

func readVarzTLS(ctx context.Context, t *testing.T, s *framework.Stack, server string) varzTLS {
	t.Helper()
	v, err := varzTLSOf(ctx, s, server)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func varzTLSOf(ctx context.Context, s *framework.Stack, server string) (varzTLS, error) {
	var v varzTLS
	pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, server+"-0", metav1.GetOptions{})
	if err != nil {
		return v, err
	}
	resp, err := http.Get("http://" + pod.Status.PodIP + ":8222/varz")
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&v)
	return v, err
}

// A new cluster has route TLS, and client TLS from a Secret. While the
// Secret does not exist, the cluster holds with CertificateNotReady naming
// it and nothing is created; once it exists the cluster comes up. Then
// every server requires and verifies TLS on its routes (and every route is
// up), a plain TCP connection to a route port gets no further than the TLS
// requirement, clients connect over TLS verifying the certificate and the
// Service's name, and a client without the CA, with another name, or
// without TLS is refused.
func TestANewClusterHasRouteTLSAndClientTLSFromASecret(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsNewTLS)
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			withClientTLS(o)
		}
	})
	var msg string
	poll.Eventually(t, time.Minute, 250*time.Millisecond, "CertificateNotReady", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		c := conditionOf(nc, clusterv1beta1.ConditionProgressing)
		if c.Reason != clusterv1beta1.ReasonCertificateNotReady {
			return fmt.Errorf("Progressing %s: %s", c.Reason, c.Message)
		}
		msg = c.Message
		return nil
	})
	t.Logf("held: %s", msg)
	requireContains(t, "the hold", msg, "spec.tls.secret", "demo-client-tls", "no server was changed")
	// That a hold writes nothing is proven in pkg/controller; here a few
	// syncs pass (each Secret event syncs at once, the rest every 30 s).
	time.Sleep(5 * time.Second)
	if sts, err := s.Kube.AppsV1().StatefulSets(s.NS).List(ctx, metav1.ListOptions{}); err != nil || len(sts.Items) != 0 {
		t.Fatalf("StatefulSets created while held: %v (%v)", len(sts.Items), err)
	}
	ca := clientTLSSecret(ctx, t, s)
	nc := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
	if got, want := nc.Status.Endpoints.Client, "tls://"+clientName(s.NS)+":4222"; got != want {
		t.Errorf("status.endpoints.client %q, want %s", got, want)
	}
	for _, srv := range servers {
		v := readVarzTLS(ctx, t, s, srv)
		if !v.Cluster.TLSRequired || !v.Cluster.TLSVerify || v.Cluster.NotAfter.IsZero() {
			t.Errorf("%s: /varz cluster tls_required %v, tls_verify %v, tls_cert_not_after %v: want route TLS, verified", srv, v.Cluster.TLSRequired, v.Cluster.TLSVerify, v.Cluster.NotAfter)
		}
		if !v.TLSRequired || v.NotAfter.IsZero() {
			t.Errorf("%s: /varz tls_required %v, tls_cert_not_after %v: want client TLS", srv, v.TLSRequired, v.NotAfter)
		}
	}

	// A plain TCP route connection: a TLS route port is TLS from its first
	// byte (measured in pkg/rollout/matrix/tls_matrix_test.go): a CONNECT in the
	// clear gets not a byte back, and the connection is closed.
	pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, "demo-0-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(pod.Status.PodIP, "6222"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = conn.Write([]byte("CONNECT {}\r\nPING\r\n"))
	got, readErr := io.ReadAll(conn)
	conn.Close()
	if len(got) > 0 {
		t.Errorf("a plain route connection got %q, want nothing", got)
	}
	if ne, ok := readErr.(net.Error); ok && ne.Timeout() {
		t.Errorf("a plain route connection was not closed within 10 s")
	}
	t.Logf("plain route connection: %d bytes back, closed (%v)", len(got), readErr)

	urls := s.PodURLs(ctx, t, s.NS, "demo")
	ok := framework.Connect(t, urls, tlsOption(ca.Cert, clientName(s.NS)))
	if !ok.TLSRequired() {
		t.Error("the TLS connection does not say TLS")
	}
	other, _ := pki.NewCA("other", time.Now())
	for what, opts := range map[string][]nats.Option{
		"another CA":   {tlsOption(other.Cert, clientName(s.NS))},
		"another name": {tlsOption(ca.Cert, "demo.other.svc")},
		"no TLS":       nil,
	} {
		c, err := nats.Connect(strings.Join(urls, ","), append(opts, nats.Timeout(2*time.Second))...)
		if err == nil {
			c.Close()
			t.Errorf("a client with %s connected", what)
			continue
		}
		t.Logf("a client with %s is refused: %v", what, err)
	}

	// The generated route CA deleted under the running servers: held with
	// RouteCAMissing, no new CA, nothing restarted or rewritten.
	before := objectVersions(ctx, t, s, s.NS)
	if err := s.Kube.CoreV1().Secrets(s.NS).Delete(ctx, "demo-routes-ca", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held := waitProgressing(ctx, t, s, s.NS, metav1.ConditionFalse, clusterv1beta1.ReasonRouteCAMissing, time.Minute)
	t.Logf("kubectl delete secret demo-routes-ca: %s", progressingMessage(held))
	time.Sleep(heldFor)
	if after := objectVersions(ctx, t, s, s.NS); !equalMaps(after, before) {
		t.Errorf("a server object was written or a pod restarted with the route CA missing:\nbefore %v\nafter  %v", before, after)
	}
	if _, err := s.Kube.CoreV1().Secrets(s.NS).Get(ctx, "demo-routes-ca", metav1.GetOptions{}); err == nil {
		t.Errorf("the controller made a new demo-routes-ca under running servers")
	}
}

// Rotating the client certificate (a new one in the Secret) and the route
// certificate (the controller reissues it when its Secret goes) under a
// publisher over TLS: no pod restarts, every server reports the new
// certificates' expiry, the config is applied by Reload, and no
// acknowledged message is lost.
func TestRotatingCertificatesReloadsWithoutRestarts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsRotate)
	s.CreateNamespace(ctx, t, s.NS)
	ca := clientTLSSecret(ctx, t, s)
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			withClientTLS(o)
		}
	})
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
	secure := tlsOption(ca.Cert, clientName(s.NS))
	conn := framework.Connect(t, s.PodURLs(ctx, t, s.NS, "demo"), secure)
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateStream(ctx, t, js, "ORDERS", 3)
	pub := framework.StartPublisher(ctx, js, "ORDERS.new")
	pods := []string{"demo-0-0", "demo-1-0", "demo-2-0"}
	before := s.PodUIDs(ctx, s.NS, pods...)
	oldRoute := readVarzTLS(ctx, t, s, "demo-0").Cluster.NotAfter

	time.Sleep(1100 * time.Millisecond) // a new certificate's NotAfter differs by at least a second
	start := time.Now()
	newCert := writeClientCert(ctx, t, s, ca, true)
	waitAllReport(ctx, t, s, "the new client certificate", func(v varzTLS) bool { return v.NotAfter.Equal(newCert.NotAfter) })
	// Applied once every server reports the revision that names the new
	// certificate, which the up-to-date cluster says.
	nc := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 2*time.Minute)
	t.Logf("client certificate rotated on every server in %s (status.config.appliedBy %s)", time.Since(start).Round(time.Millisecond), nc.Status.Config.AppliedBy)
	if nc.Status.Config.AppliedBy != clusterv1beta1.AppliedByReload {
		t.Errorf("the client certificate was applied by %s (%s), want Reload", nc.Status.Config.AppliedBy, nc.Status.Config.RestartReason)
	}

	time.Sleep(1100 * time.Millisecond)
	start = time.Now()
	if err := s.Kube.CoreV1().Secrets(s.NS).Delete(ctx, "demo-routes-tls", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAllReport(ctx, t, s, "a new route certificate", func(v varzTLS) bool { return v.Cluster.NotAfter.After(oldRoute) })
	t.Logf("route certificate reissued and reloaded on every server in %s", time.Since(start).Round(time.Millisecond))

	nc = s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 2*time.Minute)
	if nc.Status.Config == nil || nc.Status.Config.AppliedBy != clusterv1beta1.AppliedByReload {
		t.Errorf("status.config %+v, want AppliedBy Reload", nc.Status.Config)
	}
	if after := s.PodUIDs(ctx, s.NS, pods...); !equalMaps(after, before) {
		t.Errorf("pods restarted: %v, before %v", after, before)
	}
	verifyNoLossOf(ctx, t, s, "ORDERS", pub, secure)
}

func waitAllReport(ctx context.Context, t *testing.T, s *framework.Stack, what string, ok func(varzTLS) bool) {
	t.Helper()
	poll.Eventually(t, 3*time.Minute, 250*time.Millisecond, "every server reports "+what, func() error {
		for _, srv := range servers {
			v, err := varzTLSOf(ctx, s, srv)
			if err != nil {
				return err
			}
			if !ok(v) {
				return fmt.Errorf("%s reports client %v, routes %v", srv, v.NotAfter, v.Cluster.NotAfter)
			}
		}
		return nil
	})
}

// Client TLS from a cert-manager Certificate (real cert-manager controllers,
// built by hack/testbin.sh): while the CA Issuer has no CA Secret, the
// Certificate the controller created is not Ready and the cluster holds
// with CertificateNotReady naming it, creating no server; once the CA
// Secret exists, cert-manager issues the certificate, the cluster comes up,
// and clients verify it under the CA for the client Service's name.
func TestClientTLSFromACertManagerCertificate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsCertManager)
	if _, err := s.Env.StartCertManager(ctx, testenv.CertManagerOptions{}); err != nil {
		t.Fatal(err)
	}
	s.CreateNamespace(ctx, t, s.NS)
	dyn := dynamic.NewForConfigOrDie(s.Env.Config)
	issuers := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}
	issuer := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
		"metadata": map[string]any{"name": "demo-ca", "namespace": s.NS},
		"spec":     map[string]any{"ca": map[string]any{"secretName": "demo-ca"}},
	}}
	if _, err := dyn.Resource(issuers).Namespace(s.NS).Create(ctx, issuer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			_ = unstructured.SetNestedField(o.Object, "demo-ca", "spec", "tls", "certificate", "issuerRef", "name")
		}
	})
	var msg string
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, "CertificateNotReady naming the Certificate", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		c := conditionOf(nc, clusterv1beta1.ConditionProgressing)
		if c.Reason != clusterv1beta1.ReasonCertificateNotReady || !strings.Contains(c.Message, "is not Ready") {
			return fmt.Errorf("Progressing %s: %s", c.Reason, c.Message)
		}
		msg = c.Message
		return nil
	})
	t.Logf("held: %s", msg)
	requireContains(t, "the hold", msg, "Certificate "+s.NS+"/demo-client-tls", "no server was changed")
	if sts, err := s.Kube.AppsV1().StatefulSets(s.NS).List(ctx, metav1.ListOptions{}); err != nil || len(sts.Items) != 0 {
		t.Fatalf("StatefulSets created while held: %d (%v)", len(sts.Items), err)
	}

	ca, err := pki.NewCA("e2e issuer CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.CoreV1().Secrets(s.NS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-ca", Namespace: s.NS}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: ca.Cert, corev1.TLSPrivateKeyKey: ca.Key},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nc := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 4*time.Minute)
	t.Logf("up %s after the CA Secret was created; endpoint %s", time.Since(start).Round(time.Millisecond), nc.Status.Endpoints.Client)
	conn := framework.Connect(t, s.PodURLs(ctx, t, s.NS, "demo"), tlsOption(ca.Cert, clientName(s.NS)))
	if !conn.TLSRequired() {
		t.Error("the connection is not TLS")
	}
}

// Route TLS turned on for a running cluster with plain routes and a stream,
// under a publisher: held with UnsupportedChange naming restart-all and
// saying JetStream keeps its data, nothing touched; restart-all restarts
// every server together onto TLS routes; every acknowledged message is
// readable, and the outage (no server accepting a client) is measured.
func TestTurningRouteTLSOnIsHeldUntilRestartAll(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsRouteTLS)
	s.CreateNamespace(ctx, t, s.NS)
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			_ = unstructured.SetNestedField(o.Object, string(clusterv1beta1.RouteTLSDisabled), "spec", "routes", "tls", "mode")
		}
	})
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
	if v := readVarzTLS(ctx, t, s, "demo-0"); v.Cluster.TLSRequired {
		t.Fatal("routes are TLS with mode Disabled")
	}
	urls := s.PodURLs(ctx, t, s.NS, "demo")
	conn := framework.Connect(t, urls)
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateStream(ctx, t, js, "ORDERS", 3)
	pub := framework.StartPublisher(ctx, js, "ORDERS.new")

	patchCluster(ctx, t, s, `{"spec":{"routes":{"tls":{"mode":"Generated"}}}}`)
	nc := waitProgressing(ctx, t, s, s.NS, metav1.ConditionFalse, clusterv1beta1.ReasonUnsupportedChange, time.Minute)
	msg := progressingMessage(nc)
	t.Logf("held: %s", msg)
	requireContains(t, "the hold", msg, "turning route TLS on or off", clusterv1beta1.AnnotationRestartAll, "JetStream keeps its streams and messages")
	// A publisher writes throughout (failed once in CI: demo-1 four writes
	// behind at one sample).
	holdsStillUnderLoad(ctx, t, s, s.NS, clusterv1beta1.ReasonUnsupportedChange, 20*time.Second)

	prober := framework.StartAcceptProber(ctx, urls, "", 50*time.Millisecond)
	patchCluster(ctx, t, s, fmt.Sprintf(`{"metadata":{"annotations":{%q:""}}}`, clusterv1beta1.AnnotationRestartAll))
	start := time.Now()
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 5*time.Minute)
	outage, failed := prober.Stop()
	t.Logf("restart-all: Settled and UpToDate after %s; no server accepted a client for %s (%d failed probes)",
		time.Since(start).Round(time.Millisecond), outage.Round(time.Millisecond), failed)
	for _, srv := range servers {
		if v := readVarzTLS(ctx, t, s, srv); !v.Cluster.TLSRequired {
			t.Errorf("%s: routes not TLS after restart-all", srv)
		}
	}
	verifyNoLossOf(ctx, t, s, "ORDERS", pub)
}
