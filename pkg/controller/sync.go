package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

var everything = labels.Everything()

// Cadence of syncs that nothing else triggers.
const (
	// inFlightRequeue: while a rollout moves or waits on its gate, observe
	// about every second, so a gate that opens is acted on within a second.
	inFlightRequeue = time.Second
	// heldRequeue: held until the user acts, or not yet settled with no
	// step to take, observe every 30 s; nothing is written when nothing
	// changed.
	heldRequeue = 30 * time.Second
	// DefaultRestRequeue: Settled, up to date and holding nothing, observe every
	// 2 minutes. An observation asks each server 4 monitoring endpoints
	// (/varz, /jsz, /routez, /healthz), so at rest that is 1 request per
	// server per 30 s (the scale target of issue 21; every 30 s it was 4).
	// A server that restarts or fails its readiness probe (every 5 s)
	// changes its pod, whose event syncs the cluster at once; only a
	// change the pod does not show (a stream falling behind) is seen up to
	// 2 minutes late. --rest-requeue changes it (SetRestRequeue).
	DefaultRestRequeue = 2 * time.Minute
)

// SetRestRequeue sets how often a cluster at rest (Settled, up to date,
// holding nothing) is observed when no event syncs it; before Run.
func (c *Controller) SetRestRequeue(d time.Duration) { c.restRequeue = d }

// requeueAfter is when a sync that decided d on an observation whose
// verdict is v looks again, when nothing else makes it sooner: within a
// second while a rollout moves (d.Soon), rest when the cluster is at rest
// (Settled, Progressing=False UpToDate, no hold), else heldRequeue.
func requeueAfter(d rollout.Decision, v observe.Verdict, rest time.Duration) time.Duration {
	switch {
	case d.Soon:
		return inFlightRequeue
	case v.Settled() && d.Hold == nil && d.Progressing.Status == metav1.ConditionFalse && d.Progressing.Reason == clusterv1beta1.ReasonUpToDate:
		return rest
	}
	return heldRequeue
}

// notControlledError reports an object in the way that the controller does
// not control. It becomes Progressing=False ReconcileFailed (rollout.Blocked
// when gathered, a refused write when creating), not a retry.
type notControlledError struct {
	kind, namespace, name string
}

func (e *notControlledError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and is not controlled by this NatsCluster: rename or delete it; the controller will not overwrite it",
		e.kind, e.namespace, e.name)
}

// sync reconciles one NatsCluster in three phases (see gather.go): decide
// (gather, render, observe, plan), write (what the Decision allows), report
// (status, Events, metrics). It returns when to look again.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer func() { logger.V(4).Info("Finished syncing", "duration", time.Since(start)) }()

	nc, err := c.clusters.NatsClusters(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("NatsCluster is gone; owned objects are left to the garbage collector")
		c.observer.Forget(key.String())
		c.ownWrites.forget(key)
		c.metrics.forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if c.ownWrites.cacheBehind(key, nc.ResourceVersion, time.Now()) {
		logger.V(4).Info("The cache has not seen this controller's last write yet; looking again shortly", "resourceVersion", nc.ResourceVersion)
		return cacheCatchUp, nil
	}

	if nc.DeletionTimestamp != nil && !hasFinalizer(nc) {
		logger.V(4).Info("NatsCluster is being deleted and holds no finalizer of this controller; left to the API server and the garbage collector")
		return 0, nil
	}

	// Decide.
	st, out, snap, in, decision, err := c.decide(ctx, nc, metav1.Now())
	if err != nil {
		return 0, err
	}

	// Write.
	if decision.ReleaseFinalizer {
		// The NatsCluster goes: no status to write.
		return 0, c.releaseFinalizer(ctx, st, decision)
	}
	nc, refused, err := c.write(ctx, st, out, decision)
	if err != nil {
		return 0, err
	}

	// Report.
	status := nc.Status.DeepCopy()
	status.ObservedGeneration = nc.Generation
	status.Replicas = nc.Spec.Replicas
	status.Endpoints = &clusterv1beta1.Endpoints{
		Client:  fmt.Sprintf("%s://%s.%s.svc:4222", clientScheme(nc), nc.Name, nc.Namespace),
		Monitor: fmt.Sprintf("http://%s-headless.%s.svc:8222", nc.Name, nc.Namespace),
	}
	c.observedStatus(status, st, snap)
	c.recordStartProblems(nc, status.Servers)
	c.applyDecision(status, nc, out, decision)
	notify := decision.Hold != nil && decision.Hold.Notify
	if refused != "" {
		c.setCondition(status, nc, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, clusterv1beta1.ReasonReconcileFailed, refused)
		notify = true
	}
	c.metrics.recordDecision(key, decision, in.Now.Time)
	c.recordHoldTransition(nc, meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing),
		meta.FindStatusCondition(status.Conditions, clusterv1beta1.ConditionProgressing), notify)
	return requeueAfter(decision, snap.Verdict, c.restRequeue), c.writeStatus(ctx, nc, status)
}

// decide is a sync's first phase: gather, render, observe, plan. It reads
// the caches and the NATS servers and writes nothing; Decide (kubectl nats
// plan) runs the same.
func (c *Controller) decide(ctx context.Context, nc *clusterv1beta1.NatsCluster, now metav1.Time) (*clusterState, *render.Output, *observe.Snapshot, rollout.Input, rollout.Decision, error) {
	st, err := c.gather(nc)
	if err != nil {
		return nil, nil, nil, rollout.Input{}, rollout.Decision{}, err
	}
	out := c.renderTarget(st)
	snap := c.observer.Observe(ctx, c.observeTarget(st))
	in, err := c.planInput(ctx, st, out, snap, now)
	if err != nil {
		return nil, nil, nil, rollout.Input{}, rollout.Decision{}, err
	}
	return st, out, snap, in, rollout.Plan(in), nil
}

// clientScheme is tls with client TLS, else nats.
func clientScheme(nc *clusterv1beta1.NatsCluster) string {
	if nc.Spec.TLS != nil {
		return "tls"
	}
	return "nats"
}

// renderTarget renders the cluster's objects, or records in st.blocked why
// they cannot be: nil then.
func (c *Controller) renderTarget(st *clusterState) *render.Output {
	if st.blocked != nil {
		return nil
	}
	in := render.Input{Cluster: st.nc, Trust: st.trust, ControllerNamespace: c.controllerNamespace}
	for _, so := range st.servers {
		r := render.RunningServer{Ordinal: so.ordinal, StatefulSet: so.statefulSet}
		if so.configMap != nil {
			r.Config = []byte(so.configMap.Data[render.ConfigKey])
		}
		if r.Config != nil || r.StatefulSet != nil {
			in.Running = append(in.Running, r)
		}
	}
	if st.systemUser != nil {
		in.SystemUser = st.systemUser.render
	}
	in.TLS = st.tls
	out, err := render.Render(in)
	if err == nil {
		out = c.chooseSystemUser(st, out, func(ru *render.SystemUser) *render.Output {
			in.SystemUser = ru
			out, err = render.Render(in)
			return out
		})
	}
	var te *render.TrustError
	switch {
	case errors.As(err, &te):
		st.blocked = &rollout.Blocked{Reason: te.Reason, Message: te.Message}
	case err != nil:
		// A *render.SpecError, or a spec render cannot turn into objects.
		st.blocked = &rollout.Blocked{Reason: clusterv1beta1.ReasonInvalidSpec, Message: err.Error()}
	}
	return out
}

// releaseFinalizer removes the finalizer the planner released, so that the
// deletion goes on; the Event says why it was released.
func (c *Controller) releaseFinalizer(ctx context.Context, st *clusterState, d rollout.Decision) error {
	nc := st.nc
	if d.DeleteClaims {
		// Before the finalizer goes: afterwards nothing would delete them.
		for _, so := range append(slices.Clone(st.servers), st.extra...) {
			if err := c.deleteClaim(ctx, nc, so.ordinal); err != nil {
				return err
			}
		}
		c.recorder.Eventf(nc, corev1.EventTypeNormal, clusterv1beta1.ReasonDeleting, "Deleting the claims of %d servers: spec.jetstream.volumeClaimTemplate.whenDeleted is Delete", len(st.servers)+len(st.extra))
	}
	if _, err := c.removeFinalizer(ctx, nc); err != nil {
		return err
	}
	c.recorder.Event(nc, corev1.EventTypeNormal, clusterv1beta1.ReasonDeleting, d.Progressing.Message)
	return nil
}

// write carries out what the decision allows: the finalizer (added to a
// cluster not being deleted before anything else), the Services and the PDB
// (they depend on the cluster's name only, so they are kept in place even
// while the spec cannot render), the servers to create, the step, and the
// one-shot annotations to clear; nothing while the NatsCluster is being
// deleted. It returns the NatsCluster to write status to (patched when the
// finalizer was added or annotations were cleared) and, when the API server
// refused a write or an object is in the way, the message for
// Progressing=False ReconcileFailed. Any other error is retried.
func (c *Controller) write(ctx context.Context, st *clusterState, out *render.Output, d rollout.Decision) (*clusterv1beta1.NatsCluster, string, error) {
	nc := st.nc
	if nc.DeletionTimestamp != nil {
		// Being deleted: the planner creates and steps nothing, and nothing
		// else is written either (no Secret, Service or PDB is made or
		// corrected for a cluster that goes).
		if d.Step != nil || len(d.Create) > 0 {
			return nc, "", fmt.Errorf("the planner asked to step or create servers of NatsCluster %s, which is being deleted", klog.KObj(nc))
		}
		return nc, "", nil
	}
	if !hasFinalizer(nc) {
		// Before any object exists, so that no server goes without it.
		patched, err := c.addFinalizer(ctx, nc)
		if err != nil {
			return nc, "", err
		}
		nc = patched
	}
	refused := func(err error) (string, error) {
		var nce *notControlledError
		var wre *writeRefusedError
		switch {
		case errors.As(err, &nce):
			return nce.Error(), nil
		case errors.As(err, &wre):
			klog.FromContext(ctx).V(2).Info("The API server refused a write", "err", err)
			return wre.Error(), nil
		}
		return "", err
	}
	if err := c.createSystemUserSecret(ctx, st); err != nil {
		msg, err := refused(err)
		return nc, msg, err
	}
	if err := c.writeTLS(ctx, st); err != nil {
		msg, err := refused(err)
		return nc, msg, err
	}
	if err := c.writeCertificate(ctx, st); err != nil {
		msg, err := refused(err)
		return nc, msg, err
	}
	if err := c.ensureSharedObjects(ctx, nc, st.shared); err != nil {
		msg, err := refused(err)
		return nc, msg, err
	}
	if err := c.ensureNetworkPolicy(ctx, nc, out); err != nil {
		msg, err := refused(err)
		return nc, msg, err
	}
	if err := c.ensurePodMonitor(ctx, nc, out); err != nil {
		msg, err := refused(err)
		return nc, msg, err
	}
	if len(d.Annotate) > 0 {
		// Before the servers it marks are created.
		patched, err := c.setAnnotations(ctx, nc, d.Annotate)
		if err != nil {
			return nc, "", err
		}
		nc, st.nc = patched, patched
	}
	if err := c.createServers(ctx, st, out, d.Create); err != nil {
		msg, err := refused(err)
		return nc, msg, err
	}
	if d.Step != nil {
		if err := c.executeStep(ctx, st, out, d.Step, d.Progressing.Message); err != nil {
			msg, err := refused(err)
			return nc, msg, err
		}
	}
	if len(d.ClearAnnotations) > 0 {
		patched, err := c.clearAnnotations(ctx, nc, d.ClearAnnotations)
		if err != nil {
			return nc, "", err
		}
		nc = patched
	}
	return nc, "", nil
}

// applyDecision writes the planner's decision into status.
func (c *Controller) applyDecision(status *clusterv1beta1.NatsClusterStatus, nc *clusterv1beta1.NatsCluster, out *render.Output, d rollout.Decision) {
	p := d.Progressing
	c.setCondition(status, nc, clusterv1beta1.ConditionProgressing, p.Status, p.Reason, p.Message)
	status.Rollout = d.Rollout
	status.Removals = d.Removals
	if p.Reason == clusterv1beta1.ReasonUpToDate && out != nil {
		if status.Config == nil || status.Config.Revision != out.Revision {
			status.Config = &clusterv1beta1.ConfigStatus{Revision: out.Revision, AppliedBy: d.AppliedBy, RestartReason: d.RestartReason}
		}
	}
}

// setCondition sets a condition with the generation it describes.
func (c *Controller) setCondition(status *clusterv1beta1.NatsClusterStatus, nc *clusterv1beta1.NatsCluster, typ string, s metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: message, ObservedGeneration: nc.Generation,
	})
}

// writeStatus writes status when it differs from what the cache holds.
func (c *Controller) writeStatus(ctx context.Context, nc *clusterv1beta1.NatsCluster, status *clusterv1beta1.NatsClusterStatus) error {
	if apiequality.Semantic.DeepEqual(&nc.Status, status) {
		return nil
	}
	updated := nc.DeepCopy()
	updated.Status = *status
	_, err := c.natsClient.ClusterV1beta1().NatsClusters(nc.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
	c.countWrite("natsclusters/status", "update")
	if err != nil {
		return fmt.Errorf("updating status of NatsCluster %s: %w", klog.KObj(nc), err)
	}
	c.ownWrites.wrote(cache.MetaObjectToName(nc), nc.ResourceVersion, time.Now())
	klog.FromContext(ctx).V(2).Info("Updated status")
	return nil
}

func (c *Controller) countWrite(resource, verb string) {
	c.metrics.APIWrites.WithLabelValues(resource, verb).Inc()
}
