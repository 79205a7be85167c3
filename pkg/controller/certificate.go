package controller

// Client TLS from a cert-manager Certificate (spec.tls.certificate): the
// controller creates the Certificate <name>-client-tls for the client
// Service's names, issued by issuerRef into the Secret <name>-client-tls,
// and renders that Secret once the Certificate is Ready. cert-manager is
// reached with the dynamic client: the controller does not depend on its
// module, and a cluster without cert-manager gets CertificateNotReady
// saying so. A renewal is a new certificate in the same Secret, which a
// reload applies (see tls.go).

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// clientTLSName names the Certificate and its Secret: demo-client-tls.
func clientTLSName(nc *clusterv1beta1.NatsCluster) string { return nc.Name + "-client-tls" }

// clientNames are the client Service's names.
func clientNames(nc *clusterv1beta1.NatsCluster) []string {
	svc := nc.Name + "." + nc.Namespace + ".svc"
	return []string{svc, svc + ".cluster.local"}
}

// desiredCertificate is the Certificate spec.tls.certificate asks for.
func desiredCertificate(nc *clusterv1beta1.NatsCluster) *unstructured.Unstructured {
	src := nc.Spec.TLS.Certificate
	ref := map[string]any{"name": src.IssuerRef.Name, "kind": keyOr(src.IssuerRef.Kind, "Issuer"), "group": keyOr(src.IssuerRef.Group, "cert-manager.io")}
	names := []any{}
	for _, n := range clientNames(nc) {
		names = append(names, n)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1",
		"kind":       "Certificate",
		"metadata": map[string]any{
			"name": clientTLSName(nc), "namespace": nc.Namespace,
			"labels": toAny(render.ClusterLabels(nc.Name)),
		},
		"spec": map[string]any{
			"secretName": clientTLSName(nc),
			"commonName": clientNames(nc)[0],
			"dnsNames":   names,
			"issuerRef":  ref,
			"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
			"usages":     []any{"server auth", "digital signature"},
		},
	}}
	u.SetOwnerReferences([]metav1.OwnerReference{render.OwnerReference(nc)})
	return u
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// specCovers says every field of want has its value in got (cert-manager
// and the API server may add defaults).
func specCovers(got, want map[string]any) bool {
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			return false
		}
		switch wv := w.(type) {
		case map[string]any:
			gm, ok := g.(map[string]any)
			if !ok || !specCovers(gm, wv) {
				return false
			}
		case []any:
			gs, ok := g.([]any)
			if !ok || !slices.EqualFunc(gs, wv, func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
				return false
			}
		default:
			if fmt.Sprint(g) != fmt.Sprint(w) {
				return false
			}
		}
	}
	return true
}

// certificateReady reads a Certificate's Ready condition.
func certificateReady(u *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		if m["status"] == "True" {
			return true, ""
		}
		return false, fmt.Sprintf("%v: %v", m["reason"], m["message"])
	}
	return false, "cert-manager has not reported on it yet"
}

// certificateWrite is the Certificate to create (got nil) or update (got's
// spec does not cover what spec.tls.certificate asks for); nil when got is
// as asked.
func certificateWrite(nc *clusterv1beta1.NatsCluster, got *unstructured.Unstructured) *unstructured.Unstructured {
	want := desiredCertificate(nc)
	if got == nil {
		return want
	}
	wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec")
	gotSpec, _, _ := unstructured.NestedMap(got.Object, "spec")
	if specCovers(gotSpec, wantSpec) {
		return nil
	}
	u := got.DeepCopy()
	u.Object["spec"] = wantSpec
	return u
}

// writeCertificate creates or updates the cluster's Certificate.
func (c *Controller) writeCertificate(ctx context.Context, p *plan) error {
	u := p.certificate
	if u == nil {
		return nil
	}
	client := c.dynamic.Resource(certificates).Namespace(u.GetNamespace())
	var err error
	verb := "creating"
	if u.GetResourceVersion() == "" {
		_, err = client.Create(ctx, u, metav1.CreateOptions{FieldManager: FieldManager})
		c.countWrite("certificates", "create")
	} else {
		verb = "updating"
		_, err = client.Update(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
		c.countWrite("certificates", "update")
	}
	if err != nil {
		return writeError(verb, "Certificate", u, err)
	}
	klog.FromContext(ctx).V(2).Info("Wrote the client Certificate", "certificate", klog.KObj(u), "verb", verb)
	return nil
}
