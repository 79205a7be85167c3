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
// authentication; under spec.gateway.tls also <name>-headless.<ns>.svc
// itself, the name other clusters' gateways dial) in <name>-routes-tls,
// both owned by the NatsCluster. Gateway TLS presents that certificate and
// verifies other clusters against the bundle of gather_gateway.go. A
// certificate with less than a third of its lifetime left, or one that no
// longer verifies under the CA, is renewed under the same CA; a missing or
// broken CA makes a new CA and certificate (which servers with the old CA
// cannot verify: only when no server runs yet is that harmless).

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

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

// routeTLSNames are the names the generated route certificate is for:
// every server's, and under spec.gateway.tls or spec.leafnodes.tls the
// headless Service's own, which other clusters and leaves dial and verify
// every server of this one under.
func routeTLSNames(nc *clusterv1beta1.NatsCluster) []string {
	h := render.HeadlessServiceName(nc.Name) + "." + nc.Namespace + ".svc"
	names := []string{"*." + h, "*." + h + ".cluster.local"}
	if g, l := nc.Spec.Gateway, nc.Spec.LeafNodes; g.TLSOn() || (l != nil && l.TLS != nil) {
		names = append(names, h, h+".cluster.local")
	}
	return names
}

// writeTLS creates or updates the generated route TLS Secrets gather made
// or renewed, CA first, before anything that renders them.
func (c *Controller) writeTLS(ctx context.Context, p *plan) error {
	for _, s := range p.facts.tlsSecrets {
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
