package controller

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// unsupportedChange names a change of the spec that the controller cannot
// carry out on the running servers, or returns "". Such a change is held
// with UnsupportedChange before any server is touched, rather than being
// half-made:
//   - fewer replicas: removing a server needs its JetStream peer removed
//     first, which no step does yet;
//   - another volume claim template: a StatefulSet's claim templates are
//     immutable, so a restart would not apply it.
func unsupportedChange(nc *clusterv1beta1.NatsCluster, existing []*appsv1.StatefulSet, servers []serverObjects, out *render.Output) string {
	var extra []string
	for _, sts := range existing {
		if !metav1.IsControlledBy(sts, nc) {
			continue
		}
		if i, ok := render.ServerOrdinal(nc.Name, sts.Name); ok && i >= nc.Spec.Replicas {
			extra = append(extra, sts.Name)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Sprintf("spec.replicas went down to %d but servers %s still run: removing servers is not supported yet; set spec.replicas back to %d",
			nc.Spec.Replicas, strings.Join(extra, ", "), int(nc.Spec.Replicas)+len(extra))
	}
	for i, so := range servers {
		if so.statefulSet == nil {
			continue
		}
		if !apiequality.Semantic.DeepEqual(so.statefulSet.Spec.VolumeClaimTemplates, out.Servers[i].StatefulSet.Spec.VolumeClaimTemplates) {
			return fmt.Sprintf("spec.jetstream.volumeClaimTemplate differs from the claim server %s was created with, and a StatefulSet's claim templates cannot change: revert it, or recreate the NatsCluster (and its PersistentVolumeClaims) to use the new one",
				so.name)
		}
	}
	return ""
}

// clusterStatefulSets lists the StatefulSets labelled as the cluster's.
func (c *Controller) clusterStatefulSets(nc *clusterv1beta1.NatsCluster) ([]*appsv1.StatefulSet, error) {
	sel := labels.SelectorFromSet(labels.Set{clusterv1beta1.LabelCluster: nc.Name})
	return c.statefulSets.StatefulSets(nc.Namespace).List(sel)
}
