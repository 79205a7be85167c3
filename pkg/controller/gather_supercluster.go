package controller

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// gatherSupercluster finds, for a NatsCluster with spec.gateway, the
// members of its supercluster this controller runs: the NatsClusters with
// a gateway that reach it through gateway remotes by clusterRef, in either
// direction and through each other (a remote by urls is another Kubernetes
// cluster's: it takes no turns here). They share one Lease (SuperclusterLeaseName).
func (g *gatherer) gatherSupercluster(f *facts) error {
	nc := f.nc
	if nc.Spec.Gateway == nil {
		return nil
	}
	all, err := g.src.Clusters.List(labels.Everything())
	if err != nil {
		return err
	}
	f.supercluster = superclusterOf(holderOf(nc), all)
	for _, r := range nc.Spec.Gateway.Remotes {
		if r.ClusterRef != nil {
			other, err := g.src.Clusters.NatsClusters(cmp.Or(r.ClusterRef.Namespace, nc.Namespace)).Get(r.ClusterRef.Name)
			if err != nil || other.Spec.JetStream == nil {
				// Not there yet, or without JetStream: no meta group of
				// its own to merge.
				continue
			}
		}
		f.jetStreamRemotes = append(f.jetStreamRemotes, r.Name)
	}
	return nil
}

// superclusterOf is the sorted keys (namespace/name) of the clusters with a
// gateway that reach me by clusterRef remotes, either way, me among them.
func superclusterOf(me string, all []*clusterv1beta1.NatsCluster) []string {
	edges := map[string][]string{}
	for _, c := range all {
		if c.Spec.Gateway == nil {
			continue
		}
		from := holderOf(c)
		edges[from] = append(edges[from], from)
		for _, r := range c.Spec.Gateway.Remotes {
			if r.ClusterRef == nil {
				continue
			}
			to := cmp.Or(r.ClusterRef.Namespace, c.Namespace) + "/" + r.ClusterRef.Name
			edges[from] = append(edges[from], to)
			edges[to] = append(edges[to], from)
		}
	}
	// A remote that names a cluster without a gateway (or none at all)
	// joins nothing: only clusters with a gateway are members.
	gateway := map[string]bool{}
	for _, c := range all {
		if c.Spec.Gateway != nil {
			gateway[holderOf(c)] = true
		}
	}
	seen, todo := map[string]bool{me: true}, []string{me}
	for len(todo) > 0 {
		k := todo[0]
		todo = todo[1:]
		for _, o := range edges[k] {
			if !seen[o] && gateway[o] {
				seen[o] = true
				todo = append(todo, o)
			}
		}
	}
	members := make([]string, 0, len(seen))
	for k := range seen {
		members = append(members, k)
	}
	slices.Sort(members)
	return members
}

// SuperclusterLeaseName is the name of the Lease the members take turns on:
// named after the first member by name, so it stays while members join
// and leave behind it.
func SuperclusterLeaseName(members []string) string {
	if len(members) == 0 {
		return SuperclusterLeasePrefix + "none"
	}
	sum := sha256.Sum256([]byte(members[0]))
	return SuperclusterLeasePrefix + hex.EncodeToString(sum[:])[:12]
}
