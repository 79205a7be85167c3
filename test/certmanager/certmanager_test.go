package certmanager

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/testenv"
)

var (
	issuers      = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "issuers"}
	certificates = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
)

const (
	namespace  = "nats"
	secretName = "demo-client-tls"
)

// TestCertManagerIssuesAndRenewsFromACAIssuer runs cert-manager's
// controllers against the local control plane, has a CA Issuer issue a
// Certificate into a Secret, checks the certificate with crypto/x509, then
// renews it twice (as `cmctl renew` does, and by changing its DNS names) and
// checks that each time a new certificate lands in the same Secret.
func TestCertManagerIssuesAndRenewsFromACAIssuer(t *testing.T) {
	env := testenv.Start(t, testenv.Options{SkipCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	begin := time.Now()
	if _, err := env.StartCertManager(ctx, testenv.CertManagerOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("cert-manager up in %v", time.Since(begin).Round(time.Millisecond))
	kube := kubernetes.NewForConfigOrDie(env.Config)
	dyn := dynamic.NewForConfigOrDie(env.Config)

	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ca, caPEM, caKeyPEM := newCA(t)
	caSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-ca", Namespace: namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: caPEM, corev1.TLSPrivateKeyKey: caKeyPEM},
	}
	if _, err := kube.CoreV1().Secrets(namespace).Create(ctx, caSecret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	issuer := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1",
		"kind":       "Issuer",
		"metadata":   map[string]any{"name": "demo-ca", "namespace": namespace},
		"spec":       map[string]any{"ca": map[string]any{"secretName": "demo-ca"}},
	}}
	if _, err := dyn.Resource(issuers).Namespace(namespace).Create(ctx, issuer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := poll.Eventually(t, 30*time.Second, 50*time.Millisecond, "the CA Issuer to be Ready", func() error {
		return readyCondition(ctx, dyn, issuers, "demo-ca", 0)
	})
	t.Logf("Issuer Ready in %v", took.Round(time.Millisecond))

	dnsNames := []string{"demo.nats.svc", "demo.nats.svc.cluster.local"}
	cert := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1",
		"kind":       "Certificate",
		"metadata":   map[string]any{"name": "demo-client", "namespace": namespace},
		"spec": map[string]any{
			"secretName": secretName,
			"dnsNames":   toAny(dnsNames),
			"usages":     []any{"digital signature", "key encipherment", "server auth", "client auth"},
			"issuerRef":  map[string]any{"name": "demo-ca", "kind": "Issuer", "group": "cert-manager.io"},
		},
	}}

	var first *x509.Certificate
	t.Run("a CA Issuer issues the Certificate into its Secret", func(t *testing.T) {
		if _, err := dyn.Resource(certificates).Namespace(namespace).Create(ctx, cert, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		took := poll.Eventually(t, 60*time.Second, 50*time.Millisecond, "the Certificate to be Ready at revision 1", func() error {
			return readyCondition(ctx, dyn, certificates, "demo-client", 1)
		})
		t.Logf("Certificate Ready in %v", took.Round(time.Millisecond))
		first = checkSecret(ctx, t, kube, ca, caPEM, dnsNames)
	})
	if first == nil {
		t.FailNow()
	}

	// `cmctl renew` adds the Issuing condition to the status; cert-manager
	// then issues a new certificate (and, by default, a new key).
	second := first
	t.Run("setting the Issuing condition, as cmctl renew does, renews the certificate", func(t *testing.T) {
		// cert-manager may still be writing the status of the first
		// issuance (it failed once in CI with a conflict): read, add the
		// condition and write again until the write is of the latest.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := dyn.Resource(certificates).Namespace(namespace).Get(ctx, "demo-client", metav1.GetOptions{})
			if err != nil {
				return err
			}
			// Replaced, as cmctl renew sets it: cert-manager may have left an
			// Issuing condition of its own (appending a second one was refused
			// once: "status.conditions[2]: Duplicate value").
			old, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
			var conds []any
			for _, cond := range old {
				if m, ok := cond.(map[string]any); !ok || m["type"] != "Issuing" {
					conds = append(conds, cond)
				}
			}
			conds = append(conds, map[string]any{
				"type":               "Issuing",
				"status":             "True",
				"reason":             "ManuallyTriggered",
				"message":            "Certificate re-issuance manually triggered",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
				"observedGeneration": c.GetGeneration(),
			})
			if err := unstructured.SetNestedSlice(c.Object, conds, "status", "conditions"); err != nil {
				return err
			}
			_, err = dyn.Resource(certificates).Namespace(namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		took := poll.Eventually(t, 60*time.Second, 50*time.Millisecond, "the renewed Certificate to be Ready at revision 2", func() error {
			return readyCondition(ctx, dyn, certificates, "demo-client", 2)
		})
		t.Logf("renewed in %v", took.Round(time.Millisecond))
		second = checkSecret(ctx, t, kube, ca, caPEM, dnsNames)
		if second.SerialNumber.Cmp(first.SerialNumber) == 0 {
			t.Errorf("the Secret still holds the first certificate (serial %x)", first.SerialNumber)
		}
		if bytes.Equal(second.RawSubjectPublicKeyInfo, first.RawSubjectPublicKeyInfo) {
			t.Error("the renewed certificate kept the first key; rotationPolicy Always is the default since cert-manager v1.18")
		}
	})

	t.Run("changing the DNS names reissues the certificate with them", func(t *testing.T) {
		names := append(slices.Clone(dnsNames), "demo.nats")
		patch := fmt.Sprintf(`{"spec":{"dnsNames":[%q,%q,%q]}}`, names[0], names[1], names[2])
		if _, err := dyn.Resource(certificates).Namespace(namespace).Patch(ctx, "demo-client", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		took := poll.Eventually(t, 60*time.Second, 50*time.Millisecond, "the reissued Certificate to be Ready at revision 3", func() error {
			return readyCondition(ctx, dyn, certificates, "demo-client", 3)
		})
		t.Logf("reissued in %v", took.Round(time.Millisecond))
		third := checkSecret(ctx, t, kube, ca, caPEM, names)
		if third.SerialNumber.Cmp(second.SerialNumber) == 0 {
			t.Errorf("the Secret still holds the previous certificate (serial %x)", second.SerialNumber)
		}
	})
}

// readyCondition is nil when the object is Ready=True for its current
// generation and, when wantRevision > 0, at that status.revision.
func readyCondition(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string, wantRevision int64) error {
	obj, err := dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if wantRevision > 0 {
		rev, _, _ := unstructured.NestedInt64(obj.Object, "status", "revision")
		if rev != wantRevision {
			return fmt.Errorf("%s %s: status.revision %d, want %d (conditions %v)", gvr.Resource, name, rev, wantRevision, conditions(obj))
		}
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "Ready" {
			continue
		}
		gen, _ := m["observedGeneration"].(int64)
		if m["status"] == "True" && (gen == 0 || gen == obj.GetGeneration()) {
			return nil
		}
	}
	return fmt.Errorf("%s %s not Ready: %v", gvr.Resource, name, conditions(obj))
}

func conditions(obj *unstructured.Unstructured) []string {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var s []string
	for _, c := range conds {
		m, _ := c.(map[string]any)
		s = append(s, fmt.Sprintf("%v=%v (%v: %v)", m["type"], m["status"], m["reason"], m["message"]))
	}
	return s
}

// checkSecret checks the issued Secret: tls.crt, tls.key and ca.crt are
// there, ca.crt is the CA, the key belongs to the certificate, which chains
// to the CA for server and client use and has exactly dnsNames as its SANs.
func checkSecret(ctx context.Context, t *testing.T, kube kubernetes.Interface, ca *x509.Certificate, caPEM []byte, dnsNames []string) *x509.Certificate {
	t.Helper()
	s, err := kube.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, "ca.crt"} {
		if len(s.Data[k]) == 0 {
			t.Fatalf("Secret %s has no %s (keys %v)", secretName, k, keys(s.Data))
		}
	}
	if !bytes.Equal(bytes.TrimSpace(s.Data["ca.crt"]), bytes.TrimSpace(caPEM)) {
		t.Errorf("ca.crt is not the CA's certificate:\n%s", s.Data["ca.crt"])
	}
	pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatalf("tls.crt and tls.key do not make a key pair: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range dnsNames {
		_, err := leaf.Verify(x509.VerifyOptions{
			DNSName:   name,
			Roots:     roots,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			t.Errorf("the certificate does not verify for %s against the CA: %v", name, err)
		}
	}
	got, want := slices.Sorted(slices.Values(leaf.DNSNames)), slices.Sorted(slices.Values(dnsNames))
	if !slices.Equal(got, want) {
		t.Errorf("SANs %v, want %v", got, want)
	}
	if leaf.IsCA {
		t.Error("the issued certificate is a CA")
	}
	return leaf
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// newCA makes a self-signed ECDSA CA and returns it with its certificate
// and key in PEM.
func newCA(t *testing.T) (*x509.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "nats-operator test CA"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return ca,
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}
