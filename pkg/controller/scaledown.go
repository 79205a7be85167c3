package controller

// Removing a server beyond spec.replicas, or replacing a server of the spec
// (Remove.Replace), one phase per RemoveServer step (the planner derives
// the phase, rollout/scaledown.go and replace.go): evacuate its
// replicas and step the meta leader down over $SYS, stop it (its
// StatefulSet scaled to 0), remove its JetStream peer, then delete its
// ConfigMap, its claim and last its StatefulSet, the object that makes it a
// server of the cluster: a deletion cut short is found again. Only objects
// labelled as this cluster's server, and controlled by it where they carry a
// controller reference, are deleted, each with its UID as a precondition.

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/pkg/act"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// removeServer executes a RemoveServer step.
func (c *Controller) removeServer(ctx context.Context, p *plan, step *rollout.Step) error {
	r := step.Remove
	if r == nil {
		return errors.New("the planner asked for a RemoveServer step without its payload")
	}
	f := p.facts
	nc := f.nc
	var so *serverObjects
	from, what := f.extra, "a server beyond spec.replicas"
	if r.Replace {
		from, what = f.servers, "a server of the spec"
	}
	for i := range from {
		if from[i].name == r.Server {
			so = &from[i]
		}
	}
	if so == nil || so.statefulSet == nil {
		return fmt.Errorf("planner removes %q, which is not %s with a StatefulSet", r.Server, what)
	}
	logger := klog.FromContext(ctx).WithValues("server", r.Server, "phase", r.Phase)
	c.recordRemovalPhase(nc, r)
	system := func(what string, do func(*observe.SystemClient) error) error {
		if !c.removeSends.due(nc.Namespace+"/"+r.Server+"/"+string(r.Phase), time.Now()) {
			return nil
		}
		sys, err := c.observer.System(ctx, p.reloadVia)
		if err == nil {
			err = do(sys)
		}
		if err != nil {
			// Asked again on a later sync; the cluster shows when it is done.
			logger.V(2).Info("Could not "+what+" yet", "error", err)
		}
		return nil
	}
	switch r.Phase {
	case clusterv1beta1.RemovalEvacuating:
		return system("evacuate the server", func(s *observe.SystemClient) error { return act.Evacuate(ctx, s, r.Server) })
	case clusterv1beta1.RemovalSteppingDown:
		return system("step the meta leader down", func(s *observe.SystemClient) error { return act.StepDownMetaLeader(ctx, s, r.Successor) })
	case clusterv1beta1.RemovalStopping:
		sts := so.statefulSet
		_, err := c.kubeClient.AppsV1().StatefulSets(sts.Namespace).Patch(ctx, sts.Name, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`),
			metav1.PatchOptions{FieldManager: FieldManager})
		c.countWrite("statefulsets", "patch")
		if err != nil {
			return writeError("scaling to 0", "StatefulSet", sts, err)
		}
		return nil
	case clusterv1beta1.RemovalRemovingPeer:
		return system("remove the JetStream peer", func(s *observe.SystemClient) error {
			if err := act.RemovePeer(ctx, s, r.Server); err != nil && !errors.Is(err, act.ErrNotMember) {
				return err
			}
			return nil
		})
	case clusterv1beta1.RemovalDeleting:
		return c.deleteServerObjects(ctx, f, so)
	}
	return fmt.Errorf("the planner asked for removal phase %q, which this controller does not know", r.Phase)
}

// recordRemovalPhase emits an Event when a removal enters a phase.
func (c *Controller) recordRemovalPhase(nc *clusterv1beta1.NatsCluster, r *rollout.RemoveServerStep) {
	for _, cur := range nc.Status.Removals {
		if cur.Server == r.Server && cur.Phase == r.Phase {
			return
		}
	}
	verb := "Removing"
	if r.Replace {
		verb = "Replacing"
	}
	c.recorder.Eventf(nc, corev1.EventTypeNormal, clusterv1beta1.EventServerRemoval, "%s %s: %s", verb, r.Server, r.Phase)
}

// deleteServerObjects deletes a removed server's ConfigMap and claim, then
// its StatefulSet.
func (c *Controller) deleteServerObjects(ctx context.Context, f *facts, so *serverObjects) error {
	nc := f.nc
	want := render.ServerLabels(nc.Name, so.ordinal)
	labelled := func(l map[string]string) bool { return hasLabels(l, want) }
	del := func(kind string, obj metav1.Object, do func(metav1.DeleteOptions) error, resource string) error {
		uid := obj.GetUID()
		err := do(metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		c.countWrite(resource, "delete")
		if err != nil && !apierrors.IsNotFound(err) {
			return writeError("deleting", kind, obj, err)
		}
		return nil
	}
	if cm := so.configMap; cm != nil && labelled(cm.Labels) {
		if err := del("ConfigMap", cm, func(o metav1.DeleteOptions) error {
			return c.kubeClient.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, o)
		}, "configmaps"); err != nil {
			return err
		}
	}
	if err := c.deleteClaim(ctx, f, so.ordinal); err != nil {
		return err
	}
	sts := so.statefulSet
	if err := del("StatefulSet", sts, func(o metav1.DeleteOptions) error {
		return c.kubeClient.AppsV1().StatefulSets(sts.Namespace).Delete(ctx, sts.Name, o)
	}, "statefulsets"); err != nil {
		return err
	}
	c.recorder.Eventf(nc, corev1.EventTypeNormal, clusterv1beta1.EventServerRemoval, "Removed %s: its JetStream peer, StatefulSet, ConfigMap and claim %s are gone", so.name, claimName(nc, so.ordinal))
	return nil
}

// deleteClaim deletes a server's claim, if it is labelled as that server's,
// with its UID as a precondition.
func (c *Controller) deleteClaim(ctx context.Context, f *facts, ordinal int32) error {
	nc := f.nc
	claim := f.claims[ordinal]
	if claim == nil || !hasLabels(claim.Labels, render.ServerLabels(nc.Name, ordinal)) || claim.DeletionTimestamp != nil {
		return nil
	}
	uid := claim.UID
	err := c.kubeClient.CoreV1().PersistentVolumeClaims(nc.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	c.countWrite("persistentvolumeclaims", "delete")
	if err != nil && !apierrors.IsNotFound(err) {
		return writeError("deleting", "PersistentVolumeClaim", claim, err)
	}
	return nil
}

// hasLabels says whether l carries every label of want.
func hasLabels(l, want map[string]string) bool {
	for k, v := range want {
		if l[k] != v {
			return false
		}
	}
	return true
}
