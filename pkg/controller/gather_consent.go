package controller

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// A clusterRef (spec.gateway.remotes, spec.leafnodes.remotes) naming a
// NatsCluster of another namespace points this cluster's servers at that
// one and copies its routes CA (gatherGatewayTLS, leafRemoteCA): whoever
// may create a NatsCluster in one namespace would otherwise read another
// namespace's CA and join its supercluster or hub uninvited. Such a
// reference is followed only where the referenced NatsCluster consents,
// with its annotation AnnotationAllowReferencesFrom listing the referring
// namespace (or "*"); a reference within the namespace needs none.

// clusterRefs are nc's references to other NatsClusters, each with the
// field that makes it.
func clusterRefs(nc *clusterv1beta1.NatsCluster) (refs []*clusterv1beta1.NatsClusterReference, fields []string) {
	if g := nc.Spec.Gateway; g != nil {
		for i, r := range g.Remotes {
			if r.ClusterRef != nil {
				refs, fields = append(refs, r.ClusterRef), append(fields, fmt.Sprintf("spec.gateway.remotes[%d].clusterRef", i))
			}
		}
	}
	if l := nc.Spec.LeafNodes; l != nil {
		for i, r := range l.Remotes {
			if r.ClusterRef != nil {
				refs, fields = append(refs, r.ClusterRef), append(fields, fmt.Sprintf("spec.leafnodes.remotes[%d].clusterRef", i))
			}
		}
	}
	return refs, fields
}

// gatherReferenceConsent checks every clusterRef of nc to another
// namespace against the referenced NatsCluster's consent: one that does
// not exist, or whose AnnotationAllowReferencesFrom does not list nc's
// namespace, is a referenceError (InvalidSpec) naming the field and the
// annotation that would allow it. It runs before anything of the other
// namespace is read.
func (g *gatherer) gatherReferenceConsent(f *facts) error {
	nc := f.nc
	refs, fields := clusterRefs(nc)
	for i, ref := range refs {
		ns := cmp.Or(ref.Namespace, nc.Namespace)
		if ns == nc.Namespace {
			continue
		}
		other, err := g.src.Clusters.NatsClusters(ns).Get(ref.Name)
		allow := func() string {
			return fmt.Sprintf("the annotation %s=%s on NatsCluster %s/%s would allow it (namespaces, comma-separated, or *)",
				clusterv1beta1.AnnotationAllowReferencesFrom, nc.Namespace, ns, ref.Name)
		}
		switch {
		case apierrors.IsNotFound(err):
			return &referenceError{clusterv1beta1.ReasonInvalidSpec, fmt.Sprintf(
				"%s: NatsCluster %s/%s does not exist; a NatsCluster of another namespace is referenced only once it exists and allows it: %s",
				fields[i], ns, ref.Name, allow())}
		case err != nil:
			return err
		}
		value, annotated := other.Annotations[clusterv1beta1.AnnotationAllowReferencesFrom]
		if allowsReferencesFrom(value, nc.Namespace) {
			continue
		}
		has := "has no annotation " + clusterv1beta1.AnnotationAllowReferencesFrom
		if annotated {
			has = fmt.Sprintf("has %s=%q, which does not list namespace %s", clusterv1beta1.AnnotationAllowReferencesFrom, value, nc.Namespace)
		}
		return &referenceError{clusterv1beta1.ReasonInvalidSpec, fmt.Sprintf(
			"%s: NatsCluster %s/%s does not allow references from namespace %s (it %s); %s",
			fields[i], ns, ref.Name, nc.Namespace, has, allow())}
	}
	return nil
}

// allowsReferencesFrom says whether a value of AnnotationAllowReferencesFrom
// lists namespace ns, or is "*".
func allowsReferencesFrom(value, ns string) bool {
	return slices.ContainsFunc(strings.Split(value, ","), func(s string) bool {
		s = strings.TrimSpace(s)
		return s == "*" || s == ns
	})
}

// enqueueClusterRefReferrers enqueues every NatsCluster that names obj (a
// NatsCluster) by clusterRef, so a reference held for want of consent
// moves once the referenced cluster is created or annotated, and one that
// loses it is held.
func (c *Controller) enqueueClusterRefReferrers(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	target, ok := obj.(*clusterv1beta1.NatsCluster)
	if !ok {
		return
	}
	ncs, err := c.gatherer.src.Clusters.List(everything)
	if err != nil {
		return
	}
	for _, nc := range ncs {
		refs, _ := clusterRefs(nc)
		if slices.ContainsFunc(refs, func(r *clusterv1beta1.NatsClusterReference) bool {
			return r.Name == target.Name && cmp.Or(r.Namespace, nc.Namespace) == target.Namespace
		}) {
			c.queue.Add(cache.MetaObjectToName(nc))
		}
	}
}

// consentChanged says whether an update of a NatsCluster changed its
// AnnotationAllowReferencesFrom (the only change of it that concerns the
// clusters referring to it: its status changes all the time).
func consentChanged(old, obj interface{}) bool {
	o, ok1 := old.(*clusterv1beta1.NatsCluster)
	n, ok2 := obj.(*clusterv1beta1.NatsCluster)
	if !ok1 || !ok2 {
		return false
	}
	ov, oa := o.Annotations[clusterv1beta1.AnnotationAllowReferencesFrom]
	nv, na := n.Annotations[clusterv1beta1.AnnotationAllowReferencesFrom]
	return ov != nv || oa != na
}
