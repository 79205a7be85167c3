package controller

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// A leaf remote whose credentials Secret does not exist holds the cluster
// with CredentialsNotFound naming the field, and no server is made; once
// the Secret exists, the controller copies its creds file into
// demo-leaf-credentials (key leaf-hub.creds) before it writes any server.
func TestLeafCredentialsAreCopiedBeforeAnyServerIsWritten(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.LeafNodes(false, clusterv1beta1.LeafNodeRemote{
		Name: "hub", URLs: []string{"nats://hub.example.com:7422"},
		Credentials: &clusterv1beta1.SecretKeySelector{Name: "hub-creds"},
	}))
	f := newFixture(t, nc)
	acts := f.sync()
	for _, a := range acts {
		if a.GetResource().Resource == "statefulsets" || a.GetResource().Resource == "configmaps" {
			t.Errorf("%s %s written while the credentials are missing", a.GetVerb(), a.GetResource().Resource)
		}
	}
	ev := events(f.recorder)
	if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+clusterv1beta1.ReasonCredentialsNotFound+" ") ||
		!strings.Contains(ev[0], "spec.leafnodes.remotes[0].credentials") || !strings.Contains(ev[0], `"user.creds"`) {
		t.Fatalf("events %v, want one CredentialsNotFound naming spec.leafnodes.remotes[0].credentials and its key", ev)
	}

	creds := []byte("-----BEGIN NATS USER JWT-----\neyJ...\n------END NATS USER JWT------\n")
	f.nc = writtenStatus(acts)
	f.kubeObjects = append(f.kubeObjects, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hub-creds"}, Data: map[string][]byte{"user.creds": creds}})
	acts = f.sync()
	copied := slices.IndexFunc(acts, func(a core.Action) bool {
		c, ok := a.(core.CreateAction)
		if !ok {
			return false
		}
		s, ok := c.GetObject().(*corev1.Secret)
		return ok && s.Name == "demo-leaf-credentials" && string(s.Data["leaf-hub.creds"]) == string(creds) && len(s.Data) == 1 &&
			metav1.IsControlledBy(s, f.nc)
	})
	firstServer := slices.IndexFunc(acts, func(a core.Action) bool { return a.GetResource().Resource == "statefulsets" })
	if copied < 0 || firstServer < 0 || copied > firstServer {
		t.Fatalf("actions %v: want demo-leaf-credentials created (owned, with leaf-hub.creds) before the first StatefulSet", describe(acts))
	}
}

// A leaf remote with tls by clusterRef gets the hub's routes CA copied
// into demo-leaf-credentials (key leaf-hub.ca.crt); the hub having no CA
// yet holds with CertificateNotReady naming the field.
func TestALeafRemoteOverTLSGetsTheHubsRoutesCA(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.LeafNodes(false, clusterv1beta1.LeafNodeRemote{
		Name: "hub", ClusterRef: &clusterv1beta1.NatsClusterReference{Name: "hub", Namespace: "core"}, TLS: &clusterv1beta1.LeafRemoteTLS{},
	}))
	hub := rt.NewCluster("core", "hub", rt.LeafNodes(true))
	f := newFixture(t, nc)
	f.natsObjects = []runtime.Object{hub}
	f.sync()
	if ev := events(f.recorder); len(ev) != 1 || !strings.Contains(ev[0], clusterv1beta1.ReasonCertificateNotReady) || !strings.Contains(ev[0], "spec.leafnodes.remotes[0].tls") {
		t.Fatalf("events %v, want one CertificateNotReady naming spec.leafnodes.remotes[0].tls", ev)
	}

	ca := []byte("-----BEGIN CERTIFICATE-----\nMIIBdTCCARugAwIBAgIQ\n-----END CERTIFICATE-----\n")
	f = newFixture(t, nc, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "core", Name: "hub-routes-ca"}, Data: map[string][]byte{"ca.crt": ca}})
	f.natsObjects = []runtime.Object{hub}
	acts := f.sync()
	if !slices.ContainsFunc(acts, func(a core.Action) bool {
		c, ok := a.(core.CreateAction)
		if !ok {
			return false
		}
		s, ok := c.GetObject().(*corev1.Secret)
		return ok && s.Name == "demo-leaf-credentials" && string(s.Data["leaf-hub.ca.crt"]) == string(ca)
	}) {
		t.Fatalf("actions %v: want demo-leaf-credentials created with the hub's routes CA as leaf-hub.ca.crt", describe(acts))
	}
}
