package controller

// The gatherer's reads of TLS material: the route TLS Secrets (made or
// renewed here, where the clock and entropy are), the client TLS Secret of
// spec.tls and the cert-manager Certificate of spec.tls.certificate. What
// the TLS is for: tls.go and certificate.go.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/internal/pki"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// gatherTLS resolves the routes' and clients' certificates into f.tls, or
// returns a referenceError (CertificateNotReady) naming what is missing.
func (g *gatherer) gatherTLS(ctx context.Context, f *facts, now time.Time) error {
	nc := f.nc
	switch render.RouteTLSMode(nc, f.running()) {
	case clusterv1beta1.RouteTLSGenerated:
		files, ca, err := g.gatherGeneratedRouteTLS(ctx, f, now)
		if err != nil {
			return err
		}
		f.tls.Routes, f.routesCA = files, ca
	case clusterv1beta1.RouteTLSSecret:
		ref := nc.Spec.Routes.TLS.Secret
		files, ca, err := g.gatherTLSSecret(ctx, nc, ref, "spec.routes.tls.secret", true)
		if err != nil {
			return err
		}
		files.Verify = true
		files.CADigest = caDigests(ca)
		f.tls.Routes, f.routesCA = files, ca
	}
	if t := nc.Spec.TLS; t != nil && t.Certificate != nil {
		return g.gatherCertificate(ctx, f, now)
	}
	if t := nc.Spec.TLS; t != nil && t.Secret != nil {
		files, ca, err := g.gatherTLSSecret(ctx, nc, t.Secret, "spec.tls.secret", t.VerifyClients || render.MonitorTLS(&nc.Spec))
		if err != nil {
			return err
		}
		files.Verify = t.VerifyClients
		f.tls.Client, f.tlsCA = files, ca
		return g.gatherClientCA(ctx, f, now)
	}
	return nil
}

// Keys of the Secret <name>-client-ca (render.ClientCASuffix).
const (
	keyOperatorCA    = "operator-ca.crt"
	keyOperatorCAKey = "operator-ca.key"
	keyOperatorCert  = "operator.crt"
	keyOperatorKey   = "operator.key"
	// operatorCertName is the DNS name of the controller's client
	// certificate (servers verify only its chain).
	operatorCertName = "nats-operator"
)

// gatherClientCA gives the controller a client certificate under
// spec.tls.verifyClients, where the servers refuse a client without one: it
// keeps its own CA and a certificate under it in the Secret
// <name>-client-ca, and the servers verify clients against the bundle of
// spec.tls's CA and that CA (key ca.crt), so that users' clients are
// verified as before and the controller's connections are let in. A new
// controller CA is harmless (clients' CA is in every bundle), so a missing
// or broken one is made again; the certificate is renewed under the same
// CA like the routes'. Nothing without verifyClients.
func (g *gatherer) gatherClientCA(ctx context.Context, f *facts, now time.Time) error {
	files := f.tls.Client
	if files == nil || !files.Verify {
		return nil
	}
	nc := f.nc
	name := nc.Name + render.ClientCASuffix
	s, err := g.controlledSecret(ctx, nc, name)
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	if s != nil {
		data = maps.Clone(s.Data)
	}
	ca := pki.Pair{Cert: data[keyOperatorCA], Key: data[keyOperatorCAKey]}
	if _, err := tls.X509KeyPair(ca.Cert, ca.Key); err != nil {
		if ca, err = pki.NewCA(nc.Name+" controller client CA", now); err != nil {
			return fmt.Errorf("generating the controller's client CA of %s: %w", klog.KObj(nc), err)
		}
		data = map[string][]byte{keyOperatorCA: ca.Cert, keyOperatorCAKey: ca.Key}
	}
	if pki.Check(data[keyOperatorCert], ca.Cert, []string{operatorCertName}, now) != nil {
		leaf, err := pki.Issue(ca, operatorCertName, []string{operatorCertName}, now)
		if err != nil {
			return fmt.Errorf("issuing the controller's client certificate of %s: %w", klog.KObj(nc), err)
		}
		data[keyOperatorCert], data[keyOperatorKey] = leaf.Cert, leaf.Key
	}
	// The CA of spec.tls's Secret is copied: its certificates only, so that
	// nothing else its caKey may name lands in <name>-client-ca.
	clientCA, _ := pemCertificates(f.tlsCA)
	data[keyCA] = slices.Concat(clientCA, []byte("\n"), ca.Cert)
	if s == nil || !maps.EqualFunc(s.Data, data, bytes.Equal) {
		f.tlsSecrets = append(f.tlsSecrets, ownedSecret(nc, name, s, data))
	}
	files.CASecret, files.CAKey = name, keyCA
	files.Digest = secretDigest([]byte(files.Digest), data[keyCA])
	f.clientCert = &pki.Pair{Cert: data[keyOperatorCert], Key: data[keyOperatorKey]}
	return nil
}

// gatherTLSSecret reads a TLS Secret the spec names: its certificate and key must
// load as a key pair, and its CA must be there when needCA (else it is
// used when present): for routes, and for clients under
// spec.tls.verifyClients or spec.monitoring.tls.
func (g *gatherer) gatherTLSSecret(ctx context.Context, nc *clusterv1beta1.NatsCluster, ref *clusterv1beta1.TLSSecretRef, field string, needCA bool) (*render.TLSFiles, []byte, error) {
	notReady := func(format string, args ...any) error {
		return &referenceError{clusterv1beta1.ReasonCertificateNotReady, fmt.Sprintf("%s: ", field) + fmt.Sprintf(format, args...)}
	}
	s, err := g.src.API.Secret(ctx, nc.Namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil, notReady("Secret %s/%s not found; create it with keys %s and %s (and %s)", nc.Namespace, ref.Name, keyOr(ref.CertKey, keyCert), keyOr(ref.KeyKey, keyKey), keyOr(ref.CAKey, keyCA))
	}
	if err != nil {
		return nil, nil, err
	}
	files := &render.TLSFiles{Secret: ref.Name, CertKey: keyOr(ref.CertKey, keyCert), KeyKey: keyOr(ref.KeyKey, keyKey), CAKey: keyOr(ref.CAKey, keyCA)}
	for _, k := range []string{files.CertKey, files.KeyKey} {
		if len(s.Data[k]) == 0 {
			return nil, nil, notReady("Secret %s/%s has no key %q", nc.Namespace, ref.Name, k)
		}
	}
	if _, err := tls.X509KeyPair(s.Data[files.CertKey], s.Data[files.KeyKey]); err != nil {
		return nil, nil, notReady("Secret %s/%s: keys %q and %q are not a PEM certificate and its key: %v", nc.Namespace, ref.Name, files.CertKey, files.KeyKey, err)
	}
	ca := s.Data[files.CAKey]
	switch {
	case len(ca) == 0 && needCA && render.MonitorTLS(&nc.Spec) && field != "spec.routes.tls.secret":
		// The controller and the metrics exporter verify the monitoring
		// port's certificate against it; without, they could not (and
		// never skip verification).
		return nil, nil, notReady("Secret %s/%s has no key %q: spec.monitoring.tls needs the CA of the client certificate, which the controller and the metrics exporter verify the monitoring port against", nc.Namespace, ref.Name, files.CAKey)
	case len(ca) == 0 && needCA:
		return nil, nil, notReady("Secret %s/%s has no key %q, the CA certificates are verified against", nc.Namespace, ref.Name, files.CAKey)
	case len(ca) == 0:
		files.CAKey = ""
	}
	files.Digest = secretDigest(s.Data[files.CertKey], s.Data[files.KeyKey], ca)
	return files, ca, nil
}

func keyOr(k, def string) string {
	if k == "" {
		return def
	}
	return k
}

// gatherGeneratedRouteTLS reads the generated route TLS Secrets and makes or
// renews what is missing or due (f.tlsSecrets); the files are those the Secret holds
// once written.
func (g *gatherer) gatherGeneratedRouteTLS(ctx context.Context, f *facts, now time.Time) (*render.TLSFiles, []byte, error) {
	nc := f.nc
	caSecret, err := g.controlledSecret(ctx, nc, nc.Name+routesCASuffix)
	if err != nil {
		return nil, nil, err
	}
	leafSecret, err := g.controlledSecret(ctx, nc, nc.Name+routesTLSSuffix)
	if err != nil {
		return nil, nil, err
	}
	var ca pki.Pair
	newCA := false
	if caSecret != nil {
		ca = pki.Pair{Cert: caSecret.Data[keyCA], Key: caSecret.Data[keyCAKey]}
	}
	if _, err := tls.X509KeyPair(ca.Cert, ca.Key); err != nil || caSecret == nil {
		// Never a new CA under running servers by the controller's own
		// step: only restart-all, which restarts them all together on it.
		_, restartAll := nc.Annotations[clusterv1beta1.AnnotationRestartAll]
		if runs := render.RunningRouteTLS(f.running()); len(runs) > 0 && !restartAll {
			what := "is missing"
			if caSecret != nil {
				what = fmt.Sprintf("does not hold a CA certificate and key (%s, %s)", keyCA, keyCAKey)
			}
			return nil, nil, &referenceError{clusterv1beta1.ReasonRouteCAMissing, fmt.Sprintf(
				"Secret %s/%s, the CA the routes of %s trust, %s: a new CA rolled one server at a time would split the cluster "+
					"(each server checks every new route against the CA it loaded); restore the Secret (keys %s, %s), "+
					"or annotate the NatsCluster %s to restart every server together with a new CA",
				nc.Namespace, nc.Name+routesCASuffix, strings.Join(runs, ", "), what, keyCA, keyCAKey, clusterv1beta1.AnnotationRestartAll)}
		}
		if ca, err = pki.NewCA(nc.Name+" routes CA", now); err != nil {
			return nil, nil, fmt.Errorf("generating the route CA of %s: %w", klog.KObj(nc), err)
		}
		f.tlsSecrets = append(f.tlsSecrets, ownedSecret(nc, nc.Name+routesCASuffix, caSecret, map[string][]byte{keyCA: ca.Cert, keyCAKey: ca.Key}))
		newCA = true // a new CA needs a new certificate
	}
	data := map[string][]byte{}
	if leafSecret != nil && !newCA {
		data = leafSecret.Data
	}
	if err := pki.Check(data[keyCert], ca.Cert, routeTLSNames(nc), now); err != nil || string(data[keyCA]) != string(ca.Cert) {
		if leafSecret != nil && !errors.Is(err, pki.ErrRenew) && err != nil {
			klog.V(2).InfoS("Reissuing the route certificate", "natscluster", klog.KObj(nc), "why", err.Error())
		}
		leaf, err := pki.Issue(ca, nc.Name+" routes", routeTLSNames(nc), now)
		if err != nil {
			return nil, nil, fmt.Errorf("issuing the route certificate of %s: %w", klog.KObj(nc), err)
		}
		data = map[string][]byte{keyCert: leaf.Cert, keyKey: leaf.Key, keyCA: ca.Cert}
		f.tlsSecrets = append(f.tlsSecrets, ownedSecret(nc, nc.Name+routesTLSSuffix, leafSecret, data))
	}
	return &render.TLSFiles{Secret: nc.Name + routesTLSSuffix, CertKey: keyCert, KeyKey: keyKey, CAKey: keyCA, Verify: true,
		Digest: secretDigest(data[keyCert], data[keyKey], data[keyCA]), CADigest: caDigests(data[keyCA])}, data[keyCA], nil
}

// controlledSecret reads a Secret the cluster's controller keeps: nil when
// it does not exist, a notControlledError when the NatsCluster does not
// control it.
func (g *gatherer) controlledSecret(ctx context.Context, nc *clusterv1beta1.NatsCluster, name string) (*corev1.Secret, error) {
	s, err := g.src.API.Secret(ctx, nc.Namespace, name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !metav1.IsControlledBy(s, nc) {
		return nil, &notControlledError{"Secret", s.Namespace, s.Name}
	}
	return s, nil
}

// ownedSecret is a Secret of the cluster with data: old updated, or a new
// one when old is nil.
func ownedSecret(nc *clusterv1beta1.NatsCluster, name string, old *corev1.Secret, data map[string][]byte) *corev1.Secret {
	if old != nil {
		s := old.DeepCopy()
		s.Data = data
		return s
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: nc.Namespace,
			Labels:          render.ClusterLabels(nc.Name),
			OwnerReferences: []metav1.OwnerReference{render.OwnerReference(nc)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

// secretDigest is a digest of a certificate, its key and CA, each
// length-prefixed.
func secretDigest(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
}

// gatherCertificate reads the cluster's Certificate (f.certificate), and
// its Secret once it is Ready and as the spec asks (certificateWrite says
// what decide writes when it is missing or differs). Until then a
// referenceError CertificateNotReady says what it waits for.
func (g *gatherer) gatherCertificate(ctx context.Context, f *facts, now time.Time) error {
	nc := f.nc
	notReady := func(format string, args ...any) error {
		return &referenceError{clusterv1beta1.ReasonCertificateNotReady, "spec.tls.certificate: " + fmt.Sprintf(format, args...)}
	}
	name := clientTLSName(nc)
	got, err := g.src.API.Certificate(ctx, nc.Namespace, name)
	switch {
	case errors.Is(err, ErrNoCertManager):
		return notReady("%v", err)
	case apierrors.IsNotFound(err):
		f.certificateWrite = certificateWrite(nc, nil)
		return notReady("creating cert-manager Certificate %s/%s; waiting for it to be Ready", nc.Namespace, name)
	case err != nil:
		return fmt.Errorf("reading Certificate %s/%s: %w", nc.Namespace, name, err)
	}
	if !metav1.IsControlledBy(got, nc) {
		return &notControlledError{"Certificate", nc.Namespace, got.GetName()}
	}
	f.certificate, f.certificateWrite = got, certificateWrite(nc, got)
	if f.certificateWrite != nil {
		return notReady("updating cert-manager Certificate %s/%s; waiting for it to be Ready", nc.Namespace, got.GetName())
	}
	ready, why := certificateReady(got)
	if !ready {
		return notReady("cert-manager Certificate %s/%s is not Ready: %s", nc.Namespace, got.GetName(), why)
	}
	files, ca, err := g.gatherTLSSecret(ctx, nc, &clusterv1beta1.TLSSecretRef{Name: name}, "spec.tls.certificate", nc.Spec.TLS.VerifyClients || render.MonitorTLS(&nc.Spec))
	if err != nil {
		return err
	}
	files.Verify = nc.Spec.TLS.VerifyClients
	f.tls.Client, f.tlsCA = files, ca
	return g.gatherClientCA(ctx, f, now)
}

// caDigests is render.TLSFiles.CADigest of a PEM CA bundle: the sorted,
// comma-separated digests of each certificate in it, so that the planner
// can tell a bundle that keeps a CA the servers trust (a rotation's first
// and last steps) from another CA altogether.
func caDigests(bundle []byte) string {
	var out []string
	for rest := bundle; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			out = append(out, secretDigest(b.Bytes))
		}
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), ",")
}
