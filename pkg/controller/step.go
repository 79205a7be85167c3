package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// executeStep takes the planner's one step, by its kind. why is the
// decision's Progressing message, for the Event of a step through a closed
// gate.
func (c *Controller) executeStep(ctx context.Context, p *plan, step *rollout.Step, why string) error {
	start := time.Now()
	switch step.Kind {
	case rollout.RestartOne, rollout.RestartAll:
		if err := c.restart(ctx, p, step, why); err != nil {
			return err
		}
	case rollout.Reload:
		if err := c.reload(ctx, p, step); err != nil {
			return err
		}
	case rollout.RemoveServer:
		if err := c.removeServer(ctx, p, step); err != nil {
			return err
		}
	case rollout.ExpandClaim:
		if err := c.expandClaim(ctx, p, step); err != nil {
			return err
		}
	case rollout.StartMigration:
		if err := c.startMigration(ctx, p, step); err != nil {
			return err
		}
	default:
		return fmt.Errorf("the planner asked for a %s step, which this controller does not execute", step.Kind)
	}
	c.metrics.stepTaken(cache.MetaObjectToName(p.facts.nc), step, start, time.Now())
	klog.FromContext(ctx).V(2).Info("Took a rollout step", "kind", step.Kind, "servers", step.Servers, "revision", p.out.Revision, "forced", step.Forced)
	return nil
}

// restart executes a RestartOne or RestartAll step; the Events say what
// and why. First the budget (disruption.go), then the templates of the
// servers that run: under the OnDelete strategy a template restarts
// nothing by itself, so the API server's verdict on it (an admission
// policy may refuse it) is had before anything that does — the ConfigMap,
// which the kubelet syncs into the running pod, and the pod's deletion.
// Refused, the step stops there and no server has a new config under its
// old template. Then each server's ConfigMap and its pod (restartServer).
func (c *Controller) restart(ctx context.Context, p *plan, step *rollout.Step, why string) error {
	nc, out := p.facts.nc, p.out
	idx := make([]int, len(step.Servers))
	for k, name := range step.Servers {
		i, ok := render.ServerOrdinal(nc.Name, name)
		if !ok || int(i) >= len(p.facts.servers) || int(i) >= len(out.Servers) {
			return fmt.Errorf("planner stepped unknown server %q", name)
		}
		idx[k] = int(i)
	}
	if step.Kind == rollout.RestartOne && len(step.Servers) == 1 && !step.Forced && !step.Down {
		// A server down already, a forced step and restart-all (an outage
		// asked for) are not the budget's to refuse.
		view, err := c.gatherer.gatherBudget(p.facts)
		if err != nil {
			return err
		}
		if err := disruptionAllowed(step.Servers[0], view); err != nil {
			return err
		}
	}
	for _, i := range idx {
		if so := &p.facts.servers[i]; runs(so) {
			if err := c.updateTemplate(ctx, so, &out.Servers[i]); err != nil {
				return err
			}
		}
	}
	if step.ResetJetStream {
		c.recorder.Eventf(nc, corev1.EventTypeWarning, clusterv1beta1.EventJetStreamReset,
			"JetStream starts empty because %s; left behind on the volumes, unreachable: %s",
			step.ResetWhy, rollout.CountStreams(step.StreamsLeftBehind))
	}
	if len(step.AcceptedLoss) > 0 {
		by := clusterv1beta1.AnnotationForceStep
		if step.Kind == rollout.RestartAll {
			by = clusterv1beta1.AnnotationRestartAll + "=" + clusterv1beta1.RestartAllResetJetStream
		}
		c.recorder.Eventf(nc, corev1.EventTypeWarning, clusterv1beta1.EventDataLossAccepted,
			"%s accepted the loss: restarting %s, whose JetStream store is not on a volume, destroys the only current copy of %s",
			by, strings.Join(step.Servers, ", "), rollout.CountAssets(step.AcceptedLoss))
	}
	if len(step.QuorumLoss) > 0 {
		by := clusterv1beta1.AnnotationForceStep
		if !step.Forced {
			by = "spec.rollout.acceptQuorumLoss"
		}
		c.recorder.Eventf(nc, corev1.EventTypeWarning, clusterv1beta1.EventQuorumLossAccepted,
			"%s accepted it: while %s restarts, these Raft groups have no majority of current members and take no writes: %s",
			by, strings.Join(step.Servers, ", "), describeGroups(step.QuorumLoss))
	}
	for _, i := range idx {
		if err := c.restartServer(ctx, &p.facts.servers[i], &out.Servers[i]); err != nil {
			return err
		}
	}
	forced := ""
	if step.Forced {
		forced = " (forced by " + clusterv1beta1.AnnotationForceStep + ")"
	}
	if step.Kind == rollout.RestartAll {
		c.recorder.Eventf(nc, corev1.EventTypeWarning, clusterv1beta1.EventServersRestarted,
			"Restarting %s together onto revision %s", strings.Join(step.Servers, ", "), out.Revision)
		return nil
	}
	if step.Down {
		forced = " through the closed gate: " + why
	}
	c.recorder.Eventf(nc, corev1.EventTypeNormal, clusterv1beta1.EventServerRestarted,
		"Restarting %s onto revision %s%s", strings.Join(step.Servers, ", "), out.Revision, forced)
	return nil
}

// clearAnnotations removes one-shot annotations with a patch that carries
// the resourceVersion the decision was made on: if the NatsCluster changed
// since (the user set the annotation again), the patch fails with a
// conflict and the sync runs again.
func (c *Controller) clearAnnotations(ctx context.Context, nc *clusterv1beta1.NatsCluster, keys []string) (*clusterv1beta1.NatsCluster, error) {
	annotations := map[string]interface{}{}
	for _, k := range keys {
		if _, ok := nc.Annotations[k]; ok {
			annotations[k] = nil
		}
	}
	if len(annotations) == 0 {
		return nc, nil
	}
	patched, err := c.patchMetadata(ctx, nc, "annotations", annotations)
	if err != nil {
		return nil, fmt.Errorf("clearing annotations %v of NatsCluster %s: %w", keys, klog.KObj(nc), err)
	}
	klog.FromContext(ctx).V(2).Info("Cleared one-shot annotations", "annotations", keys)
	return patched, nil
}

// setAnnotations sets the controller's own marks on a NatsCluster.
func (c *Controller) setAnnotations(ctx context.Context, nc *clusterv1beta1.NatsCluster, set map[string]string) (*clusterv1beta1.NatsCluster, error) {
	patched, err := c.patchMetadata(ctx, nc, "annotations", set)
	if err != nil {
		return nil, fmt.Errorf("setting annotations %v of NatsCluster %s: %w", set, klog.KObj(nc), err)
	}
	klog.FromContext(ctx).V(2).Info("Set annotations", "annotations", set)
	return patched, nil
}

// patchMetadata sets one field of a NatsCluster's metadata with a merge
// patch that carries the resourceVersion the decision was made on: if the
// NatsCluster changed since, the patch fails with a conflict and the sync
// runs again. The write is counted and remembered as the controller's own.
func (c *Controller) patchMetadata(ctx context.Context, nc *clusterv1beta1.NatsCluster, field string, value interface{}) (*clusterv1beta1.NatsCluster, error) {
	patch, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"resourceVersion": nc.ResourceVersion, field: value},
	})
	if err != nil {
		return nil, err
	}
	patched, err := c.natsClient.ClusterV1beta1().NatsClusters(nc.Namespace).Patch(ctx, nc.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	c.countWrite("natsclusters", "patch")
	if err != nil {
		return nil, err
	}
	c.ownWrites.wrote(cache.MetaObjectToName(nc), nc.ResourceVersion, time.Now())
	return patched, nil
}

// recordHoldTransition emits an Event when a hold that needs the user's
// attention starts, changes reason or ends; a sync that changes nothing
// emits none. notify says whether cur is such a hold (the Decision's
// Hold.Notify, or a refused write); whether old was is the planner's word on
// its reason (rollout.Notifies).
func (c *Controller) recordHoldTransition(nc *clusterv1beta1.NatsCluster, old, cur *metav1.Condition, notify bool) {
	wasHold := old != nil && rollout.Notifies(old.Reason)
	switch {
	case notify && cur != nil && (old == nil || old.Reason != cur.Reason):
		c.recorder.Event(nc, corev1.EventTypeWarning, cur.Reason, cur.Message)
	case wasHold && !notify && cur != nil:
		c.recorder.Eventf(nc, corev1.EventTypeNormal, cur.Reason, "%s ended: %s", old.Reason, cur.Message)
	}
}

// describeGroups names up to rollout.MaxNamedStreams groups: "the meta
// group, stream $G/ORDERS and 3 more".
func describeGroups(groups []string) string {
	shown := groups
	if len(shown) > rollout.MaxNamedStreams {
		shown = shown[:rollout.MaxNamedStreams]
	}
	names := make([]string, len(shown))
	for i, g := range shown {
		names[i] = g
		if g == rollout.MetaGroup {
			names[i] = "the JetStream meta group"
		}
	}
	s := strings.Join(names, ", ")
	if more := len(groups) - len(shown); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
