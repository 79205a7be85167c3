package controller

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	"github.com/nats-operator/nats-operator/internal/pki"
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

	creds := rt.NewTrust(t, rt.WithAccounts("app")).Accounts[0].UserCreds(t, "leaf")
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

// A leaf remote with tls by clusterRef (to a hub of another namespace that
// allows references from this one) gets the hub's routes CA copied
// into demo-leaf-credentials (key leaf-hub.ca.crt); the hub having no CA
// yet holds with CertificateNotReady naming the field.
func TestALeafRemoteOverTLSGetsTheHubsRoutesCA(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.LeafNodes(false, clusterv1beta1.LeafNodeRemote{
		Name: "hub", ClusterRef: &clusterv1beta1.NatsClusterReference{Name: "hub", Namespace: "core"}, TLS: &clusterv1beta1.LeafRemoteTLS{},
	}))
	hub := allowReferencesFrom(rt.NewCluster("core", "hub", rt.LeafNodes(true)), "ns")
	f := newFixture(t, nc)
	f.natsObjects = []runtime.Object{hub}
	f.sync()
	if ev := events(f.recorder); len(ev) != 1 || !strings.Contains(ev[0], clusterv1beta1.ReasonCertificateNotReady) || !strings.Contains(ev[0], "spec.leafnodes.remotes[0].tls") {
		t.Fatalf("events %v, want one CertificateNotReady naming spec.leafnodes.remotes[0].tls", ev)
	}

	hubCA, err := pki.NewCA("hub routes CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca := hubCA.Cert
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

// decoratedCreds is a creds file's layout around any JWT and seed.
func decoratedCreds(token, seed string) []byte {
	return fmt.Appendf(nil, "-----BEGIN NATS USER JWT-----\n%s\n------END NATS USER JWT------\n\n"+
		"************************* IMPORTANT *************************\n\n"+
		"-----BEGIN USER NKEY SEED-----\n%s\n------END USER NKEY SEED------\n", token, seed)
}

// A leaf remote's credentials that are not a NATS creds file (a password,
// an account's JWT and seed, a user's JWT with another user's seed, a JWT
// without a seed) hold the cluster with CredentialsNotFound naming the
// field, the Secret and its key and what is wrong, before any server is
// written; nothing is copied into demo-leaf-credentials, and the message
// never quotes the Secret's bytes.
func TestLeafCredentialsThatAreNoCredsFileHoldTheCluster(t *testing.T) {
	app := rt.NewTrust(t, rt.WithAccounts("app")).Accounts[0]
	mine, theirs := app.UserCreds(t, "leaf"), app.UserCreds(t, "other")
	between := func(creds []byte, begin string) string {
		_, rest, _ := strings.Cut(string(creds), begin)
		_, rest, _ = strings.Cut(rest, "\n")
		line, _, _ := strings.Cut(rest, "\n")
		return line
	}
	userJWT, theirSeed := between(mine, "BEGIN NATS USER JWT"), between(theirs, "BEGIN USER NKEY SEED")
	for _, tc := range []struct {
		name   string
		data   []byte
		secret string // what the message must not quote
		want   string
	}{
		{"a password", []byte("s3cr3t-db-password\n"), "s3cr3t-db-password", "holds no user JWT"},
		{"an account's JWT and seed", decoratedCreds(app.JWT, string(app.Seed)), string(app.Seed), "is not a user JWT"},
		{"another user's seed", decoratedCreds(userJWT, theirSeed), theirSeed, "is not the key of the user its JWT is for"},
		{"a JWT without a seed", []byte("-----BEGIN NATS USER JWT-----\n" + userJWT + "\n------END NATS USER JWT------\n"), userJWT, "holds no user nkey seed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := rt.NewCluster("ns", "demo", rt.LeafNodes(false, clusterv1beta1.LeafNodeRemote{
				Name: "hub", URLs: []string{"nats://hub.example.com:7422"},
				Credentials: &clusterv1beta1.SecretKeySelector{Name: "db", Key: "password"},
			}))
			f := newFixture(t, nc, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}, Data: map[string][]byte{"password": tc.data}})
			acts := f.sync()
			for _, a := range acts {
				switch r := a.GetResource().Resource; {
				case r == "statefulsets" || r == "configmaps":
					t.Errorf("%s %s written while the credentials are no creds file", a.GetVerb(), r)
				case r == "secrets":
					if s, ok := a.(core.CreateAction); ok && s.GetObject().(*corev1.Secret).Name == "demo-leaf-credentials" {
						t.Errorf("demo-leaf-credentials written: %v", describe(acts))
					}
				}
			}
			ev := events(f.recorder)
			want := `spec.leafnodes.remotes[0].credentials: Secret ns/db key "password" is not a NATS creds file: it`
			if len(ev) != 1 || !strings.HasPrefix(ev[0], "Warning "+clusterv1beta1.ReasonCredentialsNotFound+" ") ||
				!strings.Contains(ev[0], want) || !strings.Contains(ev[0], tc.want) {
				t.Fatalf("events %v, want one CredentialsNotFound saying %q and %q", ev, want, tc.want)
			}
			if strings.Contains(ev[0], tc.secret) {
				t.Errorf("the event quotes the Secret's bytes: %s", ev[0])
			}
			st := writtenStatus(acts)
			if c := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing); c == nil ||
				c.Reason != clusterv1beta1.ReasonCredentialsNotFound || !strings.Contains(c.Message, want) || strings.Contains(c.Message, tc.secret) {
				t.Errorf("Progressing %+v, want CredentialsNotFound saying %q, not quoting the Secret", c, want)
			}
			t.Log(ev[0])
		})
	}
}

// Of a leaf remote's tls.caSecret only the PEM certificates are copied: a
// private key (or any other block, or text) beside them in the Secret's
// key stays out of demo-leaf-credentials; a key that holds no certificate
// holds the cluster with CertificateNotReady naming the field.
func TestALeafRemotesCAIsCopiedWithoutItsKey(t *testing.T) {
	ca, err := pki.NewCA("hub CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	nc := rt.NewCluster("ns", "demo", rt.LeafNodes(false, clusterv1beta1.LeafNodeRemote{
		Name: "hub", URLs: []string{"tls://hub.example.com:7422"},
		TLS: &clusterv1beta1.LeafRemoteTLS{CASecret: &clusterv1beta1.CAKeySelector{Name: "hub-ca", Key: "bundle.pem"}},
	}))
	for _, tc := range []struct {
		name   string
		bundle []byte
		want   []byte // nil: held
	}{
		{"a certificate alone", ca.Cert, ca.Cert},
		{"a certificate and its key", slices.Concat([]byte("subject=CN = hub CA\n"), ca.Cert, ca.Key), ca.Cert},
		{"a key alone", ca.Key, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nc, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hub-ca"}, Data: map[string][]byte{"bundle.pem": tc.bundle}})
			acts := f.sync()
			var copied *corev1.Secret
			for _, a := range acts {
				if c, ok := a.(core.CreateAction); ok {
					if s, ok := c.GetObject().(*corev1.Secret); ok && s.Name == "demo-leaf-credentials" {
						copied = s
					}
				}
			}
			if tc.want == nil {
				ev := events(f.recorder)
				if copied != nil || len(ev) != 1 || !strings.Contains(ev[0], clusterv1beta1.ReasonCertificateNotReady) ||
					!strings.Contains(ev[0], `spec.leafnodes.remotes[0].tls.caSecret: Secret ns/hub-ca has no PEM CA certificate under key "bundle.pem"`) {
					t.Fatalf("events %v (copied %v), want one CertificateNotReady naming spec.leafnodes.remotes[0].tls.caSecret", ev, copied != nil)
				}
				return
			}
			if copied == nil {
				t.Fatalf("actions %v: want demo-leaf-credentials created", describe(acts))
			}
			if got := copied.Data["leaf-hub.ca.crt"]; !bytes.Equal(got, tc.want) || bytes.Contains(got, []byte("PRIVATE KEY")) {
				t.Errorf("leaf-hub.ca.crt holds %q, want the certificate alone", got)
			}
		})
	}
}
