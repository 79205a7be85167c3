package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// observeTarget names every server of the spec, and every server beyond it
// still being removed (it may lead groups until it is evacuated), with its
// pod's address. A server without a pod address is still expected: it
// counts as silent.
func (c *Controller) observeTarget(st *clusterState) observe.Target {
	t := observe.Target{Cluster: st.nc.Namespace + "/" + st.nc.Name, SystemCredentials: st.systemCreds}
	for _, so := range append(slices.Clone(st.servers), st.extra...) {
		addr := observe.ServerAddr{Name: so.name}
		if so.pod != nil {
			addr.Host = so.pod.Status.PodIP
		}
		t.Servers = append(t.Servers, addr)
	}
	return t
}

// planInput turns what the sync gathered, rendered and observed into the
// planner's input. out is nil when st.blocked is set. The error (reading a
// claim or a storage class) is one to retry.
func (c *Controller) planInput(ctx context.Context, st *clusterState, out *render.Output, snap *observe.Snapshot, now metav1.Time) (rollout.Input, error) {
	nc := st.nc
	in := rollout.Input{
		Cluster:     nc.Name,
		Previous:    nc.Status.Rollout,
		Annotations: nc.Annotations,
		Paused:      nc.Spec.Rollout.Paused,
		Now:         now,
		Blocked:     st.blocked,
		Deleting:    nc.DeletionTimestamp != nil,
		DeleteClaims: nc.Spec.JetStream != nil && nc.Spec.JetStream.VolumeClaimTemplate != nil &&
			nc.Spec.JetStream.VolumeClaimTemplate.WhenDeleted == clusterv1beta1.ClaimDelete,
		// Observed even when blocked: a cluster being deleted is released
		// by the streams it holds.
		Observation: observation(snap),
	}
	if out == nil {
		return in, nil
	}
	in.TargetRevision = out.Revision
	in.Target = rollout.ConfigFacts(out.Servers[0].Facts)
	if nc.Status.Config != nil {
		in.ConvergedRevision = nc.Status.Config.Revision
	}
	for _, so := range st.extra {
		x := rollout.ServerState{Name: so.name, Ordinal: int(so.ordinal), Created: so.statefulSet != nil,
			Stopped: stopped(so.statefulSet), PodExists: so.pod != nil, PodReady: kubeutil.PodReady(so.pod)}
		in.ExtraServers = append(in.ExtraServers, x)
	}
	for i, so := range st.servers {
		target := &out.Servers[i]
		s := rollout.ServerState{
			Name:                   so.name,
			Ordinal:                int(so.ordinal),
			TargetConfigRevision:   target.Revision,
			TargetTemplateRevision: target.TemplateRevision,
			PodExists:              so.pod != nil,
			PodReady:               kubeutil.PodReady(so.pod),
			// For a crash loop, the exit and the last log line rather than
			// the back-off message, which changes on every retry.
			StartProblem: startProblem(so.pod),
		}
		if sts := so.statefulSet; sts != nil {
			s.Created = true
			s.RestartRevision = sts.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision]
			s.TemplateRevision = render.TemplateRevisionOf(sts)
			if s.TemplateRevision != target.TemplateRevision {
				s.TemplateChanges = render.TemplateChanges(&sts.Spec.Template, &target.StatefulSet.Spec.Template)
			}
			s.CreatedFor = sts.Annotations[clusterv1beta1.AnnotationCreatedFor]
			s.Reload = parseReload(&sts.ObjectMeta)
			s.Stopped = stopped(sts)
			s.EphemeralStore = len(sts.Spec.VolumeClaimTemplates) == 0
			if err := c.claimChange(ctx, nc, &so, target.StatefulSet, &s); err != nil {
				return in, err
			}
			var conf []byte
			if so.configMap != nil {
				conf = []byte(so.configMap.Data[render.ConfigKey])
			}
			// An unreadable config gives facts that differ from any target,
			// so the planner never takes the server as up to date.
			running, _ := render.ReadConfig(conf, render.ImageVersion(sts))
			s.ConfigRevision = running.Revision
			s.Running = rollout.ConfigFacts(running.Facts)
		}
		if srv, ok := snap.Server(so.name); ok && srv.Answered {
			s.Answered = true
			s.ReportedRevision = srv.ConfigRevision
		}
		in.Servers = append(in.Servers, s)
	}
	st.reloadVia, in.CanReload, in.NoReload = c.reloadAccess(st, &in)
	in.ReloadTimeout = c.reloadTimeout
	return in, nil
}

// stopped says a server's StatefulSet is scaled to 0.
func stopped(sts *appsv1.StatefulSet) bool {
	return sts != nil && sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0
}

// observation is the part of the snapshot the planner needs.
func observation(snap *observe.Snapshot) rollout.Observation {
	obs := rollout.Observation{
		Observed: snap.Verdict.Reason != clusterv1beta1.ReasonObservationFailed,
		Settled: rollout.Verdict{
			Status: snap.Verdict.Status, Reason: snap.Verdict.Reason, Message: snap.Verdict.Message,
		},
		MetaLeader: snap.MetaLeader,
	}
	if leader, ok := snap.Server(snap.MetaLeader); ok {
		obs.MetaMembers = leader.MetaMembers
	}
	for _, g := range snap.Groups {
		if g.Kind == observe.GroupMeta && g.Leader != "" && g.Leader == snap.MetaLeader {
			for _, m := range g.Members {
				if m.Current && !m.Offline {
					obs.MetaCurrent = append(obs.MetaCurrent, m.Name)
				}
			}
		}
	}
	for _, acc := range snap.Streams {
		for _, s := range acc.Streams {
			obs.Streams = append(obs.Streams, rollout.StreamRef{Account: acc.Account, Name: s.Name})
		}
	}
	obs.Assets = assets(snap)
	return obs
}

// assets are the observed streams and consumers with where their copies are.
func assets(snap *observe.Snapshot) []rollout.Asset {
	var out []rollout.Asset
	for _, g := range snap.Groups {
		if g.Kind != observe.GroupStream && g.Kind != observe.GroupConsumer {
			continue
		}
		a := rollout.Asset{Account: g.Account, Name: g.Name, Leader: g.Leader}
		for _, m := range g.Members {
			a.Members = append(a.Members, m.Name)
			if m.Current && !m.Offline && !m.Pending {
				a.Current = append(a.Current, m.Name)
			}
		}
		out = append(out, a)
	}
	return out
}

// executeStep takes the planner's one step, by its kind. why is the
// decision's Progressing message, for the Event of a step through a closed
// gate.
func (c *Controller) executeStep(ctx context.Context, st *clusterState, out *render.Output, step *rollout.Step, why string) error {
	start := time.Now()
	switch step.Kind {
	case rollout.RestartOne, rollout.RestartAll:
		if err := c.restart(ctx, st, out, step, why); err != nil {
			return err
		}
	case rollout.Reload:
		if err := c.reload(ctx, st, out, step); err != nil {
			return err
		}
	case rollout.RemoveServer:
		if err := c.removeServer(ctx, st, step); err != nil {
			return err
		}
	case rollout.ExpandClaim:
		if err := c.expandClaim(ctx, st, out, step); err != nil {
			return err
		}
	default:
		return fmt.Errorf("the planner asked for a %s step, which this controller does not execute", step.Kind)
	}
	c.metrics.stepTaken(cache.MetaObjectToName(st.nc), step, start, time.Now())
	klog.FromContext(ctx).V(2).Info("Took a rollout step", "kind", step.Kind, "servers", step.Servers, "revision", out.Revision, "forced", step.Forced)
	return nil
}

// restart executes a RestartOne or RestartAll step: each server's ConfigMap,
// then its template, at the target; the Events say what and why.
func (c *Controller) restart(ctx context.Context, st *clusterState, out *render.Output, step *rollout.Step, why string) error {
	nc := st.nc
	if step.ResetJetStream {
		c.recorder.Eventf(nc, corev1.EventTypeWarning, clusterv1beta1.EventJetStreamReset,
			"JetStream starts empty because the system account changes; left behind on the volumes, unreachable: %s",
			rollout.CountStreams(step.StreamsLeftBehind))
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
	for _, name := range step.Servers {
		i, ok := render.ServerOrdinal(nc.Name, name)
		if !ok || int(i) >= len(st.servers) {
			return fmt.Errorf("planner stepped unknown server %q", name)
		}
		if err := c.restartServer(ctx, &st.servers[i], &out.Servers[i]); err != nil {
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
