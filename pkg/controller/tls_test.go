package controller

import (
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
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// withRouteSecret sets spec.routes.tls to mode Secret with the Secret name.
func withRouteSecret(nc *clusterv1beta1.NatsCluster, name string) *clusterv1beta1.NatsCluster {
	nc.Spec.Routes.TLS = &clusterv1beta1.RouteTLS{Mode: clusterv1beta1.RouteTLSSecret, Secret: &clusterv1beta1.TLSSecretRef{Name: name, CertKey: "crt", KeyKey: "key", CAKey: "ca"}}
	return nc
}

// A route TLS Secret the spec names that does not exist holds the new
// cluster with CertificateNotReady naming it; nothing but the system user
// Secret, the Services and the PDB is written.
func TestSyncHoldsAMissingRouteTLSSecret(t *testing.T) {
	f := newFixture(t, withRouteSecret(rt.NewCluster("ns", "demo"), "my-routes"))
	acts := writes(f.sync())
	for _, a := range describe(acts) {
		if strings.Contains(a, "statefulsets") || strings.Contains(a, "configmaps") {
			t.Errorf("action %s while the Secret is missing", a)
		}
	}
	c := conditionIn(writtenStatus(acts), clusterv1beta1.ConditionProgressing)
	if c.Reason != clusterv1beta1.ReasonCertificateNotReady || !strings.Contains(c.Message, "spec.routes.tls.secret: Secret ns/my-routes not found") {
		t.Errorf("Progressing %s %q, want CertificateNotReady naming ns/my-routes", c.Reason, c.Message)
	}
}

// The user's route TLS Secret renders into the servers' config volume with
// its own keys, and the config names the files.
func TestSyncRendersTheUsersRouteTLSSecret(t *testing.T) {
	now := time.Now()
	ca, _ := pki.NewCA("user CA", now)
	leaf, _ := pki.Issue(ca, "routes", []string{"*.demo-headless.ns.svc"}, now)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "my-routes"},
		Data: map[string][]byte{"crt": leaf.Cert, "key": leaf.Key, "ca": ca.Cert}}
	f := newFixture(t, withRouteSecret(rt.NewCluster("ns", "demo"), "my-routes"), secret)
	acts := writes(f.sync())
	var cm *corev1.ConfigMap
	for _, a := range acts {
		if c, ok := a.(core.CreateAction); ok {
			if o, ok := c.GetObject().(*corev1.ConfigMap); ok && o.Name == "demo-0-config" {
				cm = o
			}
		}
	}
	if cm == nil {
		t.Fatalf("no ConfigMap created: %v", describe(acts))
	}
	if conf := cm.Data[render.ConfigKey]; !strings.Contains(conf, render.ConfigDir+"/"+render.RoutesTLSDir+"/tls.crt") || !strings.Contains(conf, `"routes_certificate"`) {
		t.Errorf("the config does not name the route certificate or its digest:\n%s", conf)
	}
	for _, a := range describe(acts) {
		if strings.Contains(a, "secrets demo-routes") {
			t.Errorf("%s: the user's Secret needs no generated one", a)
		}
	}
}

// A generated route certificate with less than a third of its lifetime
// left is reissued under the same CA: only the certificate's Secret is
// written.
func TestSyncRenewsAnExpiringRouteCertificateUnderTheSameCA(t *testing.T) {
	nc := rt.NewCluster("ns", "demo")
	old := time.Now().Add(-70 * 24 * time.Hour)
	ca, _ := pki.NewCA("demo routes CA", old)
	leaf, _ := pki.Issue(ca, "demo routes", routeTLSNames(nc), old)
	owned := func(name string, data map[string][]byte) *corev1.Secret {
		s := ownedSecret(nc, name, nil, data)
		s.ResourceVersion = "1"
		return s
	}
	f := newFixture(t, nc,
		owned("demo-routes-ca", map[string][]byte{keyCA: ca.Cert, keyCAKey: ca.Key}),
		owned("demo-routes-tls", map[string][]byte{keyCert: leaf.Cert, keyKey: leaf.Key, keyCA: ca.Cert}))
	acts := writes(f.sync())
	var renewed *corev1.Secret
	for _, a := range acts {
		if u, ok := a.(core.UpdateAction); ok && a.GetVerb() == "update" {
			if s, ok := u.GetObject().(*corev1.Secret); ok {
				if s.Name != "demo-routes-tls" {
					t.Errorf("updated Secret %s, want only demo-routes-tls", s.Name)
				}
				renewed = s
			}
		}
	}
	if renewed == nil {
		t.Fatalf("the expiring certificate was not renewed: %v", describe(acts))
	}
	if err := pki.Check(renewed.Data[keyCert], ca.Cert, []string{"demo-0-0.demo-headless.ns.svc"}, time.Now()); err != nil {
		t.Errorf("the renewed certificate: %v", err)
	}
}

// The generated route CA deleted under running servers is never made again
// by the controller's own step: the cluster holds with RouteCAMissing
// naming the Secret and the servers, and nothing but status is written.
// restart-all is the way out: a new CA, and every server restarted
// together on it.
func TestAMissingRouteCAUnderRunningServersHolds(t *testing.T) {
	nc := rt.NewCluster("ns", "demo")
	f := newFixture(t, nc)
	first := writtenStatus(f.sync())
	f.keepObjects()
	var kept []runtime.Object
	for _, o := range f.kubeObjects {
		if s, ok := o.(*corev1.Secret); ok {
			if s.Name == "demo-routes-ca" {
				continue // kubectl delete secret demo-routes-ca
			}
			s.ResourceVersion = "1" // as the API server would have it
		}
		kept = append(kept, o)
	}
	f.kubeObjects = kept
	f.nc = first
	acts := writes(f.sync())
	if got := describe(acts); !slices.Equal(got, []string{"update natsclusters/status demo"}) {
		t.Errorf("writes with the route CA missing: %v, want only the status", got)
	}
	c := conditionIn(writtenStatus(acts), clusterv1beta1.ConditionProgressing)
	if c.Reason != clusterv1beta1.ReasonRouteCAMissing {
		t.Fatalf("Progressing %s %q, want RouteCAMissing", c.Reason, c.Message)
	}
	for _, want := range []string{"Secret ns/demo-routes-ca, the CA the routes of demo-0, demo-1, demo-2 trust, is missing",
		"would split the cluster", "cluster.nats-operator.io/restart-all", "no server was changed"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("the hold does not say %q: %s", want, c.Message)
		}
	}

	restartAll := writtenStatus(acts).DeepCopy()
	restartAll.Annotations = map[string]string{clusterv1beta1.AnnotationRestartAll: ""}
	f.nc = restartAll
	got := describe(writes(f.sync()))
	for _, want := range []string{"create secrets demo-routes-ca", "update secrets demo-routes-tls", "update statefulsets demo-0", "update statefulsets demo-2"} {
		if !slices.Contains(got, want) {
			t.Errorf("restart-all: no %q in %v", want, got)
		}
	}
}

// The user's route TLS Secret given a certificate of another CA is never
// rolled one server at a time (servers on different CAs cannot route to
// each other: TestTLSRouteNewCAOneServerAtATime): held with
// UnsupportedChange naming another route CA and restart-all, nothing
// written but status. A new certificate under the same CA, and a bundle
// that keeps the CA the servers trust, roll as before.
func TestAnotherRouteCAInTheUsersSecretIsHeld(t *testing.T) {
	now := time.Now()
	caA, _ := pki.NewCA("user CA", now)
	caB, _ := pki.NewCA("another CA", now)
	names := []string{"*.demo-headless.ns.svc"}
	secret := func(ca pki.Pair, rv string) *corev1.Secret {
		leaf, _ := pki.Issue(ca, "routes", names, now)
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "my-routes", ResourceVersion: rv},
			Data: map[string][]byte{"crt": leaf.Cert, "key": leaf.Key, "ca": ca.Cert}}
	}
	f := newFixture(t, withRouteSecret(rt.NewCluster("ns", "demo"), "my-routes"), secret(caA, "1"))
	first := writtenStatus(f.sync())
	f.keepObjects()
	for _, o := range f.kubeObjects {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Annotations[clusterv1beta1.AnnotationRoutesCA] == "" {
			t.Fatalf("ConfigMap %s does not record its route CA", cm.Name)
		}
	}
	replace := func(s *corev1.Secret) {
		for i, o := range f.kubeObjects {
			if old, ok := o.(*corev1.Secret); ok && old.Name == s.Name {
				f.kubeObjects[i] = s
			}
		}
	}
	f.nc = first
	// The same CA, a new certificate: not held (it rolls once the gate
	// opens; this cluster is not observed).
	replace(secret(caA, "2"))
	if c := conditionIn(writtenStatus(writes(f.sync())), clusterv1beta1.ConditionProgressing); c.Reason == clusterv1beta1.ReasonUnsupportedChange {
		t.Errorf("a new certificate under the same CA is held: %s", c.Message)
	}

	// A bundle of both CAs (a rotation's first step): not held either; it
	// reloads one server at a time (TestTLSRouteRotation).
	bundle := secret(caA, "3")
	bundle.Data["ca"] = append(append([]byte{}, caA.Cert...), caB.Cert...)
	replace(bundle)
	if c := conditionIn(writtenStatus(writes(f.sync())), clusterv1beta1.ConditionProgressing); c.Reason == clusterv1beta1.ReasonUnsupportedChange {
		t.Errorf("a bundle keeping the CA the servers trust is held: %s", c.Message)
	}

	f.keepObjects()
	replace(secret(caB, "4"))
	acts := writes(f.sync())
	for _, w := range describe(acts) {
		if strings.Contains(w, "configmaps") || strings.Contains(w, "statefulsets") || strings.Contains(w, "pods") {
			t.Errorf("%s with another route CA", w)
		}
	}
	c := conditionIn(writtenStatus(acts), clusterv1beta1.ConditionProgressing)
	if c.Reason != clusterv1beta1.ReasonUnsupportedChange || !strings.Contains(c.Message, "another route CA cannot roll out one server at a time") ||
		!strings.Contains(c.Message, clusterv1beta1.AnnotationRestartAll) {
		t.Errorf("Progressing %s %q, want UnsupportedChange naming another route CA and restart-all", c.Reason, c.Message)
	}
}
