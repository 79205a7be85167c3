package controller

import (
	"bytes"
	"cmp"
	"context"
	"encoding/pem"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// gatherGatewayTLS resolves spec.gateway.tls into f.tls.Gateway: the
// routes' certificate and key, and the bundle of CAs the servers verify
// other clusters' gateways against, which it keeps in the Secret
// <name>-gateway-ca (render.GatewayCASuffix, key ca.crt): this cluster's
// routes CA, the routes CA of every remote named by clusterRef, and the
// CAs of spec.gateway.tls.caSecret. A remote NatsCluster that does not
// exist yet, or whose routes CA is not there yet, is a referenceError
// (CertificateNotReady) naming it, and so is a caSecret that is missing or
// holds no CA: servers rendered without a remote's CA could not reach it,
// and with JetStream's meta group spanning both the gate would then wait
// forever for the reload that adds it (seen in the e2e test before this
// hold: east and west created together). The cluster's own route TLS
// Secrets are written under the hold, so two clusters created together
// find each other's CA on their next sync: the Secrets informer enqueues
// this cluster when a Secret of a remote's namespace changes
// (enqueueGatewayReferrers). Without route TLS nothing is resolved: render
// refuses spec.gateway.tls then, naming the field.
func (g *gatherer) gatherGatewayTLS(ctx context.Context, f *facts) error {
	nc := f.nc
	gw := nc.Spec.Gateway
	routes := f.tls.Routes
	if !gw.TLSOn() || routes == nil {
		return nil
	}
	bundle := [][]byte{f.routesCA}
	for i, r := range gw.Remotes {
		if r.ClusterRef == nil {
			continue
		}
		ns := cmp.Or(r.ClusterRef.Namespace, nc.Namespace)
		ca, err := g.remoteRoutesCA(ctx, ns, r.ClusterRef.Name)
		if err != nil {
			return err
		}
		if caDigests(ca) == "" {
			return &referenceError{clusterv1beta1.ReasonCertificateNotReady, fmt.Sprintf(
				"spec.gateway.remotes[%d].clusterRef: the routes CA of NatsCluster %s/%s is not there yet (its Secret %s%s, or the CA of its spec.routes.tls.secret), "+
					"and gateway TLS verifies its servers against it: waiting for it (the remote needs spec.routes.tls other than Disabled)",
				i, ns, r.ClusterRef.Name, r.ClusterRef.Name, routesCASuffix)}
		}
		bundle = append(bundle, ca)
	}
	if gw.TLS != nil && gw.TLS.CASecret != nil {
		sel := gw.TLS.CASecret
		ca, err := g.caSecret(ctx, nc, *sel, "spec.gateway.tls.caSecret", "the PEM CA certificates of the remote clusters")
		if err != nil {
			return err
		}
		bundle = append(bundle, ca)
	}
	data := map[string][]byte{keyCA: caBundle(bundle)}
	name := nc.Name + render.GatewayCASuffix
	s, err := g.controlledSecret(ctx, nc, name)
	if err != nil {
		return err
	}
	if s == nil || !bytes.Equal(s.Data[keyCA], data[keyCA]) || len(s.Data) != 1 {
		f.tlsSecrets = append(f.tlsSecrets, ownedSecret(nc, name, s, data))
	}
	f.tls.Gateway = &render.TLSFiles{Secret: routes.Secret, CertKey: routes.CertKey, KeyKey: routes.KeyKey,
		CAKey: keyCA, CASecret: name, Verify: true, Digest: routes.Digest, CADigest: caDigests(data[keyCA])}
	return nil
}

// caSecret reads the PEM CAs at sel (key default ca.crt), named by field:
// their certificates only (pemCertificates), whatever else the key holds;
// a Secret missing or holding no CA certificate is a referenceError
// (CertificateNotReady) saying to put what there.
func (g *gatherer) caSecret(ctx context.Context, nc *clusterv1beta1.NatsCluster, sel clusterv1beta1.CAKeySelector, field, what string) ([]byte, error) {
	key := keyOr(sel.Key, keyCA)
	s, err := g.src.API.Secret(ctx, nc.Namespace, sel.Name)
	if apierrors.IsNotFound(err) {
		return nil, &referenceError{clusterv1beta1.ReasonCertificateNotReady, fmt.Sprintf(
			"%s: Secret %s/%s not found; create it with %s under key %q", field, nc.Namespace, sel.Name, what, key)}
	}
	if err != nil {
		return nil, err
	}
	ca, n := pemCertificates(s.Data[key])
	if n == 0 {
		return nil, &referenceError{clusterv1beta1.ReasonCertificateNotReady, fmt.Sprintf(
			"%s: Secret %s/%s has no PEM CA certificate under key %q", field, nc.Namespace, sel.Name, key)}
	}
	return ca, nil
}

// remoteRoutesCA is the routes CA of NatsCluster namespace/name: the CA
// of its spec.routes.tls.secret (mode Secret), else of its generated
// <name>-routes-ca, its PEM certificates only (pemCertificates: the key
// may name any key of that Secret, a CA's private key beside it); nil when
// the cluster or the Secret is not there, or holds no certificate.
func (g *gatherer) remoteRoutesCA(ctx context.Context, namespace, name string) ([]byte, error) {
	other, err := g.src.Clusters.NatsClusters(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	secret, key := name+routesCASuffix, keyCA
	if t := other.Spec.Routes.TLS; t != nil && t.Mode == clusterv1beta1.RouteTLSSecret && t.Secret != nil {
		secret, key = t.Secret.Name, keyOr(t.Secret.CAKey, keyCA)
	}
	s, err := g.src.API.Secret(ctx, namespace, secret)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ca, _ := pemCertificates(s.Data[key])
	return ca, nil
}

// caBundle is the PEM CA certificates of cas, each once, in order of first
// appearance.
func caBundle(cas [][]byte) []byte {
	var out bytes.Buffer
	var seen [][]byte
	for _, ca := range cas {
		for rest := ca; ; {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			if b.Type != "CERTIFICATE" || slices.ContainsFunc(seen, func(s []byte) bool { return bytes.Equal(s, b.Bytes) }) {
				continue
			}
			seen = append(seen, b.Bytes)
			_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})
		}
	}
	return out.Bytes()
}
