package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	"github.com/nats-operator/nats-operator/internal/pki"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
	"github.com/nats-operator/nats-operator/pkg/rollout"
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

// Under spec.tls.verifyClients the controller keeps its own client CA and
// certificate in demo-client-ca, written before anything renders it; the
// servers verify clients against the bundle of the user's CA and the
// controller's (the user's clients are verified as before), projected from
// that Secret; the controller's certificate verifies under the bundle, and
// reloadAccess presents it. A second sync writes no Secret again.
func TestVerifyClientsGivesTheControllerAClientCertificate(t *testing.T) {
	now := time.Now()
	userCA, _ := pki.NewCA("user client CA", now)
	leaf, _ := pki.Issue(userCA, "demo", []string{"demo.ns.svc"}, now)
	nc := rt.NewCluster("ns", "demo")
	nc.Spec.TLS = &clusterv1beta1.ClientTLS{Secret: &clusterv1beta1.TLSSecretRef{Name: "my-tls", CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt"}, VerifyClients: true}
	f := newFixture(t, nc, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "my-tls", ResourceVersion: "1"},
		Data: map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": userCA.Cert}})
	acts := writes(f.sync())
	got := describe(acts)
	at := slices.Index(got, "create secrets demo-client-ca")
	if at < 0 {
		t.Fatalf("no Secret demo-client-ca created: %v", got)
	}
	if sts := slices.Index(got, "create statefulsets demo-0"); sts < at {
		t.Errorf("StatefulSet demo-0 created at %d, before the Secret it projects (%d): %v", sts, at, got)
	}
	var secret *corev1.Secret
	var conf string
	var volume *corev1.Volume
	for _, a := range acts {
		c, ok := a.(core.CreateAction)
		if !ok {
			continue
		}
		switch o := c.GetObject().(type) {
		case *corev1.Secret:
			if o.Name == "demo-client-ca" {
				secret = o
			}
		case *corev1.ConfigMap:
			if o.Name == "demo-0-config" {
				conf = o.Data[render.ConfigKey]
			}
		case *appsv1.StatefulSet:
			if o.Name == "demo-0" {
				for i, v := range o.Spec.Template.Spec.Volumes {
					if v.Projected != nil {
						volume = &o.Spec.Template.Spec.Volumes[i]
					}
				}
			}
		}
	}
	if !metav1.IsControlledBy(secret, f.nc) {
		t.Errorf("demo-client-ca is not owned by the NatsCluster: %v", secret.OwnerReferences)
	}
	bundle := secret.Data[keyCA]
	if !strings.Contains(string(bundle), string(userCA.Cert)) || !strings.Contains(string(bundle), string(secret.Data[keyOperatorCA])) {
		t.Errorf("the bundle does not hold both the user's CA and the controller's:\n%s", bundle)
	}
	if err := pki.Check(secret.Data[keyOperatorCert], secret.Data[keyOperatorCA], []string{operatorCertName}, now); err != nil {
		t.Errorf("the controller's client certificate: %v", err)
	}
	if !strings.Contains(conf, `"verify": true`) || !strings.Contains(conf, render.ConfigDir+"/"+render.ClientTLSDir+"/ca.crt") {
		t.Errorf("the config does not verify clients against the client CA file:\n%s", conf)
	}
	if volume == nil {
		t.Fatal("no projected config volume")
	}
	var caFrom []string
	for _, src := range volume.Projected.Sources {
		if src.Secret == nil {
			continue
		}
		for _, it := range src.Secret.Items {
			if it.Path == render.ClientTLSDir+"/ca.crt" {
				caFrom = append(caFrom, src.Secret.Name+"/"+it.Key)
			}
		}
	}
	if !slices.Equal(caFrom, []string{"demo-client-ca/ca.crt"}) {
		t.Errorf("client-tls/ca.crt projected from %v, want only demo-client-ca/ca.crt", caFrom)
	}

	f.keepObjects()
	f.nc = writtenStatus(acts)
	for _, w := range describe(writes(f.sync())) {
		if strings.Contains(w, "secrets") {
			t.Errorf("second sync: %s", w)
		}
	}
}

// reloadAccess presents the controller's client certificate under
// verifyClients, and says why not while it has none.
func TestReloadAccessUnderVerifyClients(t *testing.T) {
	nc := rt.NewCluster("ns", "demo")
	f := &facts{nc: nc, tls: render.TLS{Client: &render.TLSFiles{Verify: true}}, tlsCA: []byte("ca")}
	if _, ok, why := reloadAccess(f, nil, &rollout.Input{}); ok || !strings.Contains(why, "client certificate") {
		t.Errorf("without the controller's certificate: ok=%t %q, want refused naming the client certificate", ok, why)
	}
	f.clientCert = &pki.Pair{Cert: []byte("cert"), Key: []byte("key")}
	f.nc.Spec.Auth = &clusterv1beta1.AuthSpec{}
	f.systemCreds = []byte("creds")
	tg, ok, why := reloadAccess(f, nil, &rollout.Input{})
	if !ok || string(tg.TLSClientCert) != "cert" || string(tg.TLSClientKey) != "key" || string(tg.TLSRootCAs) != "ca" {
		t.Errorf("with it: ok=%t %q, target cert %q key %q CAs %q", ok, why, tg.TLSClientCert, tg.TLSClientKey, tg.TLSRootCAs)
	}
}
