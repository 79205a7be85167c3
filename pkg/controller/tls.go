package controller

// TLS of the routes (spec.routes.tls) and of clients (spec.tls). The
// certificates are rendered into each server's config volume next to the
// config (render.TLS), with a digest of each Secret in the config, so a new
// certificate is a new config revision: a reload applies it and the server's
// report of the revision confirms it.
//
// Route TLS Generated: the controller keeps a CA (ECDSA P-256, 10 years) in
// the Secret <name>-routes-ca and a certificate under it for
// *.<name>-headless.<ns>.svc[.cluster.local] (90 days, server and client
// authentication) in <name>-routes-tls, both owned by the NatsCluster. A
// certificate with less than a third of its lifetime left, or one that no
// longer verifies under the CA, is renewed under the same CA; a missing or
// broken CA makes a new CA and certificate (which servers with the old CA
// cannot verify: only when no server runs yet is that harmless).

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/internal/pki"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// Names and keys of the generated route TLS Secrets.
const (
	routesCASuffix  = "-routes-ca"
	routesTLSSuffix = "-routes-tls"
	keyCert         = "tls.crt"
	keyKey          = "tls.key"
	keyCA           = "ca.crt"
	keyCAKey        = "ca.key"
)

// routeTLSNames are the names the generated route certificate is for.
func routeTLSNames(nc *clusterv1beta1.NatsCluster) []string {
	h := render.HeadlessServiceName(nc.Name) + "." + nc.Namespace + ".svc"
	return []string{"*." + h, "*." + h + ".cluster.local"}
}

// routeTLSMode is what spec.routes.tls asks for. Without it the servers
// keep what they run: Generated when a server's config has route TLS (or
// no server exists yet: a new cluster), Disabled when servers run plain
// routes (a cluster an earlier release made), so an upgrade of the
// controller never turns route TLS on, which would split the cluster.
func routeTLSMode(st *clusterState) clusterv1beta1.RouteTLSMode {
	if t := st.nc.Spec.Routes.TLS; t != nil {
		if t.Mode == "" {
			return clusterv1beta1.RouteTLSGenerated
		}
		return t.Mode
	}
	created := false
	for _, so := range slices.Concat(st.servers, st.extra) {
		if so.statefulSet == nil {
			continue
		}
		created = true
		if so.configMap == nil {
			continue
		}
		// The RouteTLS fact the planner classifies, read back as it does.
		if running, err := render.ReadConfig([]byte(so.configMap.Data[render.ConfigKey]), render.ImageVersion(so.statefulSet)); err == nil && running.Facts.RouteTLS {
			return clusterv1beta1.RouteTLSGenerated
		}
	}
	if created {
		return clusterv1beta1.RouteTLSDisabled
	}
	return clusterv1beta1.RouteTLSGenerated
}

// gatherTLS resolves the routes' and clients' certificates into st.tls, or
// returns a referenceError (CertificateNotReady) naming what is missing.
func (c *Controller) gatherTLS(st *clusterState, now time.Time) error {
	nc := st.nc
	switch routeTLSMode(st) {
	case clusterv1beta1.RouteTLSGenerated:
		files, err := c.gatherGeneratedRouteTLS(st, now)
		if err != nil {
			return err
		}
		st.tls.Routes = files
	case clusterv1beta1.RouteTLSSecret:
		ref := nc.Spec.Routes.TLS.Secret
		files, _, err := c.gatherTLSSecret(nc, ref, "spec.routes.tls.secret", true)
		if err != nil {
			return err
		}
		files.Verify = true
		st.tls.Routes = files
	}
	if t := nc.Spec.TLS; t != nil && t.Certificate != nil {
		return c.gatherCertificate(context.TODO(), st)
	}
	if t := nc.Spec.TLS; t != nil && t.Secret != nil {
		files, ca, err := c.gatherTLSSecret(nc, t.Secret, "spec.tls.secret", t.VerifyClients)
		if err != nil {
			return err
		}
		files.Verify = t.VerifyClients
		st.tls.Client, st.tlsCA = files, ca
	}
	return nil
}

// gatherTLSSecret reads a TLS Secret the spec names: its certificate and key must
// load as a key pair, and its CA must be there when needCA (else it is
// used when present).
func (c *Controller) gatherTLSSecret(nc *clusterv1beta1.NatsCluster, ref *clusterv1beta1.TLSSecretRef, field string, needCA bool) (*render.TLSFiles, []byte, error) {
	notReady := func(format string, args ...any) error {
		return &referenceError{clusterv1beta1.ReasonCertificateNotReady, fmt.Sprintf("%s: ", field) + fmt.Sprintf(format, args...)}
	}
	s, err := c.secrets.Secrets(nc.Namespace).Get(ref.Name)
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

// gatherGeneratedRouteTLS reads the generated route TLS Secrets and decides what
// to create or renew (st.tlsSecrets); the files are those the Secret holds
// once written.
func (c *Controller) gatherGeneratedRouteTLS(st *clusterState, now time.Time) (*render.TLSFiles, error) {
	nc := st.nc
	owned := func(name string) (*corev1.Secret, error) {
		s, err := c.secrets.Secrets(nc.Namespace).Get(name)
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
	caSecret, err := owned(nc.Name + routesCASuffix)
	if err != nil {
		return nil, err
	}
	leafSecret, err := owned(nc.Name + routesTLSSuffix)
	if err != nil {
		return nil, err
	}
	var ca pki.Pair
	if caSecret != nil {
		ca = pki.Pair{Cert: caSecret.Data[keyCA], Key: caSecret.Data[keyCAKey]}
	}
	if _, err := tls.X509KeyPair(ca.Cert, ca.Key); err != nil || caSecret == nil {
		if ca, err = pki.NewCA(nc.Name+" routes CA", now); err != nil {
			return nil, fmt.Errorf("generating the route CA of %s: %w", klog.KObj(nc), err)
		}
		st.tlsSecrets = append(st.tlsSecrets, ownedSecret(nc, nc.Name+routesCASuffix, caSecret, map[string][]byte{keyCA: ca.Cert, keyCAKey: ca.Key}))
		leafSecret = nil // a new CA needs a new certificate
	}
	data := map[string][]byte{}
	if leafSecret != nil {
		data = leafSecret.Data
	}
	if err := pki.Check(data[keyCert], ca.Cert, routeTLSNames(nc), now); err != nil || string(data[keyCA]) != string(ca.Cert) {
		if leafSecret != nil && !errors.Is(err, pki.ErrRenew) && err != nil {
			klog.V(2).InfoS("Reissuing the route certificate", "natscluster", klog.KObj(nc), "why", err.Error())
		}
		leaf, err := pki.Issue(ca, nc.Name+" routes", routeTLSNames(nc), now)
		if err != nil {
			return nil, fmt.Errorf("issuing the route certificate of %s: %w", klog.KObj(nc), err)
		}
		data = map[string][]byte{keyCert: leaf.Cert, keyKey: leaf.Key, keyCA: ca.Cert}
		st.tlsSecrets = append(st.tlsSecrets, ownedSecret(nc, nc.Name+routesTLSSuffix, leafSecret, data))
	}
	return &render.TLSFiles{Secret: nc.Name + routesTLSSuffix, CertKey: keyCert, KeyKey: keyKey, CAKey: keyCA, Verify: true,
		Digest: secretDigest(data[keyCert], data[keyKey], data[keyCA])}, nil
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

// writeTLS creates or updates the generated route TLS Secrets, CA first,
// before anything else is written.
func (c *Controller) writeTLS(ctx context.Context, st *clusterState) error {
	for _, s := range st.tlsSecrets {
		var err error
		verb := "creating"
		if s.ResourceVersion == "" {
			_, err = c.kubeClient.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{FieldManager: FieldManager})
			c.countWrite("secrets", "create")
		} else {
			verb = "updating"
			_, err = c.kubeClient.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{FieldManager: FieldManager})
			c.countWrite("secrets", "update")
		}
		if err != nil {
			return writeError(verb, "Secret", s, err)
		}
		klog.FromContext(ctx).V(2).Info("Wrote a route TLS Secret", "secret", klog.KObj(s), "verb", verb)
	}
	return nil
}
