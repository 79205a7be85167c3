package controller

import (
	"encoding/pem"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	"github.com/nats-operator/nats-operator/internal/pki"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// Under spec.gateway.tls the controller keeps east-gateway-ca: east's own
// routes CA and the routes CA of the remote west (another namespace, which
// allows references from east),
// written before any server; the generated route certificate is also for
// the headless Service's names; a west that has no CA yet, and a caSecret
// that does not exist, hold with CertificateNotReady naming the field.
func TestGatewayCABundleHoldsOwnAndRemoteRoutesCAs(t *testing.T) {
	nc := rt.NewCluster("east", "east", rt.Gateway(rt.GatewayTo("west", "west")))
	nc.Spec.Gateway.TLS, nc.Spec.Gateway.Insecure = &clusterv1beta1.GatewayTLS{}, false
	west := allowReferencesFrom(rt.NewCluster("west", "west", rt.Gateway(rt.GatewayTo("east", "east"))), "east")
	westCA, err := pki.NewCA("west routes CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	westCASecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "west", Name: "west-routes-ca"}, Data: map[string][]byte{"ca.crt": westCA.Cert}}

	created := func(acts []core.Action, name string) (*corev1.Secret, int) {
		for i, a := range acts {
			if c, ok := a.(core.CreateAction); ok {
				if s, ok := c.GetObject().(*corev1.Secret); ok && s.Name == name {
					return s, i
				}
			}
		}
		return nil, -1
	}
	certs := func(b []byte) (out [][]byte) {
		for rest := b; ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				return out
			}
			out = append(out, blk.Bytes)
		}
	}

	f := newFixture(t, nc, westCASecret)
	f.natsObjects = []runtime.Object{west}
	acts := f.sync()
	bundle, at := created(acts, "east-gateway-ca")
	routesCA, _ := created(acts, "east-routes-ca")
	routesTLS, _ := created(acts, "east-routes-tls")
	firstServer := slices.IndexFunc(acts, func(a core.Action) bool { return a.GetResource().Resource == "statefulsets" })
	if bundle == nil || routesCA == nil || routesTLS == nil || at > firstServer {
		t.Fatalf("actions %v: want east-routes-ca, east-routes-tls and east-gateway-ca created before the first StatefulSet", describe(acts))
	}
	got := certs(bundle.Data["ca.crt"])
	want := append(certs(routesCA.Data["ca.crt"]), certs(westCA.Cert)...)
	if !slices.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Errorf("east-gateway-ca holds %d certificates, want east's routes CA and west's (%d)", len(got), len(want))
	}
	if err := pki.Check(routesTLS.Data["tls.crt"], routesCA.Data["ca.crt"], []string{"east-headless.east.svc", "east-headless.east.svc.cluster.local", "east-0-0.east-headless.east.svc"}, time.Now()); err != nil {
		t.Errorf("the route certificate under gateway TLS: %v", err)
	}

	// west without its CA Secret yet: held, no server made, east's own
	// routes CA written (west finds it on its next sync).
	f = newFixture(t, nc)
	f.natsObjects = []runtime.Object{west}
	acts = f.sync()
	_, ownCA := created(acts, "east-routes-ca")
	_, gatewayCA := created(acts, "east-gateway-ca")
	if ownCA < 0 || gatewayCA >= 0 || slices.ContainsFunc(acts, func(a core.Action) bool { return a.GetResource().Resource == "statefulsets" }) {
		t.Errorf("actions %v: want east-routes-ca written, and no east-gateway-ca or server, while west has no CA", describe(acts))
	}
	ev := events(f.recorder)
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+clusterv1beta1.ReasonCertificateNotReady+" ") || !strings.Contains(ev[0], "spec.gateway.remotes[0].clusterRef") ||
		!strings.Contains(ev[0], "west/west") {
		t.Errorf("events %v, want one CertificateNotReady naming spec.gateway.remotes[0].clusterRef and west/west", ev)
	}

	withCASecret := nc.DeepCopy()
	withCASecret.Spec.Gateway.TLS.CASecret = &clusterv1beta1.CAKeySelector{Name: "far-cas"}
	f = newFixture(t, withCASecret, westCASecret)
	f.natsObjects = []runtime.Object{west}
	acts = f.sync()
	if _, i := created(acts, "east-gateway-ca"); i >= 0 {
		t.Errorf("east-gateway-ca written while spec.gateway.tls.caSecret is missing")
	}
	ev = events(f.recorder)
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+clusterv1beta1.ReasonCertificateNotReady+" ") || !strings.Contains(ev[0], "spec.gateway.tls.caSecret") {
		t.Errorf("events %v, want one CertificateNotReady naming spec.gateway.tls.caSecret", ev)
	}
}
