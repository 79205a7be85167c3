package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/pki"
	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// clientCertOption verifies the servers' certificate under ca for name and
// presents leaf.
func clientCertOption(t *testing.T, ca []byte, name string, leaf pki.Pair) nats.Option {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.X509KeyPair(leaf.Cert, leaf.Key)
	if err != nil {
		t.Fatal(err)
	}
	return nats.Secure(&tls.Config{RootCAs: pool, ServerName: name, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
}

// spec.tls.verifyClients on a 4-server cluster under a publisher that
// presents a certificate of the user's CA: a client without a certificate,
// and one with a certificate of another CA, are refused on every server;
// the controller, with its own client certificate (Secret demo-client-ca),
// observes the cluster, applies new server tags by Reload (no pod
// restarted) and scales down to 3 servers (the JetStream peer removal goes
// over its $SYS connection, which the servers verify like any client); no
// acknowledged message is lost.
func TestVerifyClientsRefusesClientsWithoutACertificateAndTheControllerOperates(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsVerifyClients)
	s.CreateNamespace(ctx, t, s.NS)
	ca := clientTLSSecret(ctx, t, s)
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		if o.GetKind() == "NatsCluster" {
			withClientTLS(o)
			_ = unstructured.SetNestedField(o.Object, true, "spec", "tls", "verifyClients")
			_ = unstructured.SetNestedField(o.Object, int64(4), "spec", "replicas")
		}
	})
	up := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 4*time.Minute)
	if a := up.Status.SystemAccess; a == nil || a.Via != clusterv1beta1.SystemAccessControllerUser || len(a.Operations) != len(clusterv1beta1.SystemOperations) {
		t.Errorf("status.systemAccess %+v, want the controller's user enabling %v", a, clusterv1beta1.SystemOperations)
	}
	four := []string{"demo-0", "demo-1", "demo-2", "demo-3"}
	for _, srv := range four {
		if v := readVarzTLS(ctx, t, s, srv); !v.TLSRequired || !v.TLSVerify {
			t.Errorf("%s: /varz tls_required %v, tls_verify %v: want client certificates verified", srv, v.TLSRequired, v.TLSVerify)
		}
	}
	if sec, err := s.Kube.CoreV1().Secrets(s.NS).Get(ctx, "demo-client-ca", metav1.GetOptions{}); err != nil {
		t.Errorf("the controller's client CA Secret: %v", err)
	} else if !strings.Contains(string(sec.Data["ca.crt"]), string(ca.Cert)) {
		t.Error("the servers' client CA bundle does not hold the user's CA")
	}

	urls := s.PodURLs(ctx, t, s.NS, "demo")
	other, _ := pki.NewCA("other", time.Now())
	otherLeaf, _ := pki.Issue(other, "intruder", []string{"intruder"}, time.Now())
	for what, opt := range map[string]nats.Option{
		"no certificate":              tlsOption(ca.Cert, clientName(s.NS)),
		"a certificate of another CA": clientCertOption(t, ca.Cert, clientName(s.NS), otherLeaf),
	} {
		for _, u := range urls {
			c, err := nats.Connect(u, opt, nats.Timeout(2*time.Second), nats.NoReconnect())
			if err == nil {
				c.Close()
				t.Errorf("a client with %s connected to %s", what, u)
				continue
			}
			t.Logf("a client with %s is refused by %s: %v", what, u, err)
		}
	}

	appLeaf, err := pki.Issue(ca, "app", []string{"app"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	secure := clientCertOption(t, ca.Cert, clientName(s.NS), appLeaf)
	conn := framework.Connect(t, urls, secure)
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateStream(ctx, t, js, "ORDERS", 3)
	pub := framework.StartPublisher(ctx, js, "ORDERS.new")
	pods := []string{"demo-0-0", "demo-1-0", "demo-2-0", "demo-3-0"}
	before := s.PodUIDs(ctx, s.NS, pods...)

	start := time.Now()
	patchCluster(ctx, t, s, `{"spec":{"serverTags":{"az":"a"}}}`)
	nc := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
	t.Logf("server tags applied in %s, status.config.appliedBy %s", time.Since(start).Round(time.Millisecond), nc.Status.Config.AppliedBy)
	if nc.Status.Config.AppliedBy != clusterv1beta1.AppliedByReload {
		t.Errorf("the tags were applied by %s (%s), want Reload", nc.Status.Config.AppliedBy, nc.Status.Config.RestartReason)
	}
	if after := s.PodUIDs(ctx, s.NS, pods...); !equalMaps(after, before) {
		t.Errorf("pods restarted for a reload: %v, before %v", after, before)
	}

	start = time.Now()
	patchCluster(ctx, t, s, `{"spec":{"replicas":3}}`)
	poll.Eventually(t, 6*time.Minute, 500*time.Millisecond, "demo-3 removed and the cluster settled", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if _, err := s.Kube.AppsV1().StatefulSets(s.NS).Get(ctx, "demo-3", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("StatefulSet demo-3 still there (%v); removals %+v; %s", err, nc.Status.Removals, framework.Conditions(nc))
		}
		return framework.CheckSettledUpToDate(nc)
	})
	t.Logf("scaled down to 3 servers in %s", time.Since(start).Round(time.Millisecond))
	final, _ := s.Cluster(ctx, s.NS, "demo")
	if got := metaMembers(ctx, t, s, servers, final.Status.JetStream.MetaLeader); len(got) != 3 || strings.Contains(strings.Join(got, ","), "demo-3") {
		t.Errorf("the meta group lists %v, want demo-0, demo-1, demo-2 (demo-3 removed as a peer)", got)
	}
	if after := s.PodUIDs(ctx, s.NS, pods[:3]...); !equalMaps(after, map[string]string{pods[0]: before[pods[0]], pods[1]: before[pods[1]], pods[2]: before[pods[2]]}) {
		t.Errorf("the remaining pods restarted: %v, before %v", after, before)
	}
	verifyNoLossOf(ctx, t, s, "ORDERS", pub, secure)
}
