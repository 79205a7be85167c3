package controller

// Claims of the servers. A server's StatefulSet keeps the claim template it
// was created with (claim templates are immutable), so a different claim
// template in the spec is decided per server, against its claim:
//
//   - only a larger storage request, and the claim's storage class allows
//     expansion: the claim grows in place (rollout.ClaimExpansion, then an
//     ExpandClaim step raises the claim's request; the storage class and
//     the kubelet do the rest), no restart; once the claim reports the new
//     capacity, the server needs nothing more;
//   - anything else (a smaller request, another class or access mode, a
//     class that cannot expand, no claim template before or after): the
//     server is replaced by one created with the new template
//     (ServerState.ClaimTemplateDiffers, rollout/replace.go).
//
// Claims and storage classes are read with GETs, only for a server whose
// claim template differs: no informer holds every claim of the cluster.

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// claimName is the claim the StatefulSet controller makes for a server.
func claimName(nc *clusterv1beta1.NatsCluster, ordinal int32) string {
	return render.DataVolumeName + "-" + render.PodName(nc.Name, ordinal)
}

// claimChange fills a server's ClaimTemplateDiffers or ClaimExpansion from
// its StatefulSet, the target's, and its claim and class as gathered.
func claimChange(f *facts, so serverObjects, target *appsv1.StatefulSet, s *rollout.ServerState) {
	have, want := so.statefulSet.Spec.VolumeClaimTemplates, target.Spec.VolumeClaimTemplates
	if render.SameClaimTemplates(have, want) {
		return
	}
	s.ClaimTemplateDiffers = true
	if len(have) != 1 || len(want) != 1 {
		return
	}
	size := want[0].Spec.Resources.Requests[corev1.ResourceStorage]
	old := have[0].Spec.Resources.Requests[corev1.ResourceStorage]
	same := have[0].DeepCopy()
	same.Spec.Resources.Requests[corev1.ResourceStorage] = size
	if size.Cmp(old) <= 0 || !render.SameClaimTemplates([]corev1.PersistentVolumeClaim{*same}, want) {
		return
	}
	// Only a larger storage request: the claim decides.
	claim := f.claims[so.ordinal]
	if claim == nil {
		return
	}
	requested := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity := claim.Status.Capacity[corev1.ResourceStorage]
	if requested.Cmp(size) >= 0 && capacity.Cmp(size) >= 0 {
		// Grown already: the StatefulSet's template is only stale.
		s.ClaimTemplateDiffers = false
		return
	}
	if claim.Spec.StorageClassName == nil || !f.expandable[*claim.Spec.StorageClassName] {
		return
	}
	s.ClaimTemplateDiffers = false
	s.ClaimExpansion = &rollout.ClaimExpansion{Size: size.String(), Requested: requested.Cmp(size) >= 0, Progress: claimProgress(claim, size)}
}

// claimProgress is "1Gi of 2Gi" and the claim's resize conditions.
func claimProgress(claim *corev1.PersistentVolumeClaim, size resource.Quantity) string {
	capacity := claim.Status.Capacity[corev1.ResourceStorage]
	out := fmt.Sprintf("%s of %s", capacity.String(), size.String())
	var conds []string
	for _, cond := range claim.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		t := string(cond.Type)
		if cond.Message != "" {
			t += " (" + cond.Message + ")"
		}
		conds = append(conds, t)
	}
	if len(conds) > 0 {
		out += ", " + strings.Join(conds, ", ")
	}
	return out
}

// expandClaim executes an ExpandClaim step: the server's claim gets the
// target claim template's storage request.
func (c *Controller) expandClaim(ctx context.Context, p *plan, step *rollout.Step) error {
	if step.Expand == nil {
		return fmt.Errorf("the planner asked for an ExpandClaim step without its payload")
	}
	nc, out := p.facts.nc, p.out
	i, ok := render.ServerOrdinal(nc.Name, step.Expand.Server)
	if !ok || int(i) >= len(out.Servers) || len(out.Servers[i].StatefulSet.Spec.VolumeClaimTemplates) != 1 {
		return fmt.Errorf("planner grows the claim of %q, which has no claim template to grow to", step.Expand.Server)
	}
	size := out.Servers[i].StatefulSet.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]
	name := claimName(nc, i)
	claim := p.facts.claims[i]
	if claim == nil {
		return fmt.Errorf("planner grows claim %s/%s, which the sync did not find", nc.Namespace, name)
	}
	// The claim's UID as a precondition: a claim deleted and made again
	// since it was read is not grown blindly.
	patch := fmt.Sprintf(`{"metadata":{"uid":%q},"spec":{"resources":{"requests":{"storage":%q}}}}`, claim.UID, size.String())
	_, err := c.kubeClient.CoreV1().PersistentVolumeClaims(nc.Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: FieldManager})
	c.countWrite("persistentvolumeclaims", "patch")
	if err != nil {
		return writeError("growing", "PersistentVolumeClaim", claim, err)
	}
	c.recorder.Eventf(nc, corev1.EventTypeNormal, clusterv1beta1.ReasonExpandingStorage, "Growing the claim %s of %s to %s in place", name, step.Expand.Server, size.String())
	klog.FromContext(ctx).V(2).Info("Raised a claim's storage request", "claim", name, "size", size.String())
	return nil
}

// claimStillGoing says whether the claim a server about to be created
// would use is still being deleted (the server waits for it to go).
func claimStillGoing(f *facts, so serverObjects, target *appsv1.StatefulSet) bool {
	if len(target.Spec.VolumeClaimTemplates) == 0 {
		return false
	}
	claim := f.claims[so.ordinal]
	return claim != nil && claim.DeletionTimestamp != nil
}
