package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

var everything = labels.Everything()

// Cadence of syncs that nothing else triggers.
const (
	// inFlightRequeue: while a rollout moves or waits on its gate, observe
	// about every second, so a gate that opens is acted on within a second.
	inFlightRequeue = time.Second
	// idleRequeue: settled and up to date (or held until the user acts),
	// observe every 30 s; nothing is written when nothing changed.
	idleRequeue = 30 * time.Second
)

// notControlledError reports an object in the way that the controller does
// not control. It becomes Progressing=False ReconcileFailed, not a retry.
type notControlledError struct {
	kind, namespace, name string
}

func (e *notControlledError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and is not controlled by this NatsCluster: rename or delete it; the controller will not overwrite it",
		e.kind, e.namespace, e.name)
}

// sync reconciles one NatsCluster: gather, render, create what is missing,
// observe, plan, take at most one step, write status. It returns when to
// look again.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer func() { logger.V(4).Info("Finished syncing", "duration", time.Since(start)) }()

	nc, err := c.clusters.NatsClusters(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("NatsCluster is gone; owned objects are left to the garbage collector")
		c.observer.Forget(key.String())
		c.ownWrites.forget(key)
		c.metrics.GateWaiting.DeletePartialMatch(map[string]string{"namespace": key.Namespace, "name": key.Name})
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if c.ownWrites.cacheBehind(key, nc.ResourceVersion, time.Now()) {
		logger.V(4).Info("The cache has not seen this controller's last write yet; looking again shortly", "resourceVersion", nc.ResourceVersion)
		return cacheCatchUp, nil
	}
	now := metav1.Now()

	status := nc.Status.DeepCopy()
	status.ObservedGeneration = nc.Generation
	status.Replicas = nc.Spec.Replicas
	status.Endpoints = &clusterv1beta1.Endpoints{
		Client:  fmt.Sprintf("nats://%s.%s.svc:4222", nc.Name, nc.Namespace),
		Monitor: fmt.Sprintf("http://%s-headless.%s.svc:8222", nc.Name, nc.Namespace),
	}
	oldProgressing := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing)

	// hold sets Progressing=False with a reason the user must act on; the
	// cluster is still observed so Ready and Settled stay true to life.
	hold := func(reason, message string) {
		c.setCondition(status, nc, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, reason, message)
	}

	st, gatherErr := c.gather(nc)
	var out *render.Output
	var refErr *referenceError
	var nce *notControlledError
	switch {
	case errors.As(gatherErr, &refErr):
		hold(refErr.reason, refErr.message)
	case errors.As(gatherErr, &nce):
		hold(clusterv1beta1.ReasonReconcileFailed, nce.Error())
	case gatherErr != nil:
		return 0, gatherErr
	default:
		out, err = render.Render(render.Input{Cluster: nc, Trust: st.trust})
		var te *render.TrustError
		var se *render.SpecError
		switch {
		case errors.As(err, &te):
			hold(te.Reason, te.Message+"; no server was changed")
			out = nil
		case errors.As(err, &se):
			hold(clusterv1beta1.ReasonInvalidSpec, se.Error()+"; no server was changed")
			out = nil
		case err != nil:
			hold(clusterv1beta1.ReasonUnsupportedChange, err.Error())
			out = nil
		}
	}

	// holdOnWrite turns an error of writing an object into a hold when it is
	// one the user must act on (an object in the way, a refused write), and
	// reports whether it did; any other error is retried.
	holdOnWrite := func(err error) bool {
		var wre *writeRefusedError
		switch {
		case errors.As(err, &nce):
			hold(clusterv1beta1.ReasonReconcileFailed, nce.Error())
		case errors.As(err, &wre):
			logger.V(2).Info("The API server refused a write", "err", err)
			hold(clusterv1beta1.ReasonReconcileFailed, wre.Error())
		default:
			return false
		}
		out = nil
		return true
	}

	if err := c.ensureSharedObjects(ctx, nc); err != nil && !holdOnWrite(err) {
		return 0, err
	}
	if out != nil {
		existing, err := c.clusterStatefulSets(nc)
		if err != nil {
			return 0, err
		}
		if msg := unsupportedChange(nc, existing, st.servers, out); msg != "" {
			hold(clusterv1beta1.ReasonUnsupportedChange, msg+"; no server was changed")
			out = nil
		}
	}
	if out != nil {
		if err := c.createMissingServers(ctx, st, out); err != nil && !holdOnWrite(err) {
			return 0, err
		}
	}

	snap := c.observer.Observe(ctx, c.observeTarget(st))
	c.observedStatus(status, st, snap)
	c.recordStartProblems(nc, status.Servers)

	requeue := idleRequeue
	var decision rollout.Decision
	if out != nil {
		decision = rollout.Plan(c.planInput(st, out, snap, now))
		if decision.Step != nil {
			if err := c.executeStep(ctx, st, out, decision.Step, decision.Progressing.Message); err != nil && !holdOnWrite(err) {
				return 0, err
			}
		}
	}
	if out != nil {
		if len(decision.ClearAnnotations) > 0 {
			patched, err := c.clearAnnotations(ctx, nc, decision.ClearAnnotations)
			if err != nil {
				return 0, err
			}
			// The status write below must carry the patched resourceVersion.
			status.ObservedGeneration = patched.Generation
			nc = patched
		}
		c.applyDecision(status, nc, out, decision)
		// A rollout in flight, or a hold that NATS itself can release (a
		// stream raised to more replicas catches up), is looked at every
		// second.
		if decision.Step != nil || decision.Progressing.Status == metav1.ConditionTrue ||
			decision.Progressing.Reason == clusterv1beta1.ReasonDataLossOnRestart {
			requeue = inFlightRequeue
		}
		c.recordGate(nc, decision.Rollout)
	}
	// A hold (a reference to fix, an object in the way outside the caches)
	// is looked at again every idleRequeue as well as on events.

	c.recordHoldTransition(nc, oldProgressing, meta.FindStatusCondition(status.Conditions, clusterv1beta1.ConditionProgressing))
	return requeue, c.writeStatus(ctx, nc, status)
}

// applyDecision writes the planner's decision into status.
func (c *Controller) applyDecision(status *clusterv1beta1.NatsClusterStatus, nc *clusterv1beta1.NatsCluster, out *render.Output, d rollout.Decision) {
	p := d.Progressing
	c.setCondition(status, nc, clusterv1beta1.ConditionProgressing, p.Status, p.Reason, p.Message)
	status.Rollout = d.Rollout
	if p.Reason == clusterv1beta1.ReasonUpToDate {
		cfg := &clusterv1beta1.ConfigStatus{Revision: out.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
		if status.Config != nil && status.Config.Revision == out.Revision {
			cfg = status.Config
		} else if len(d.Changes) > 0 {
			cfg.RestartReason = describeChanges(d.Changes)
		}
		status.Config = cfg
	}
}

func describeChanges(changes []rollout.Change) string {
	s := ""
	for i, ch := range changes {
		if i > 0 {
			s += "; "
		}
		s += ch.String()
	}
	return s
}

// recordGate sets the gauge of the gate check the cluster waits for.
func (c *Controller) recordGate(nc *clusterv1beta1.NatsCluster, r *clusterv1beta1.RolloutStatus) {
	c.metrics.GateWaiting.DeletePartialMatch(map[string]string{"namespace": nc.Namespace, "name": nc.Name})
	if r != nil && r.Gate != nil && r.Gate.WaitingFor != "" {
		c.metrics.GateWaiting.WithLabelValues(nc.Namespace, nc.Name, r.Gate.WaitingFor).Set(1)
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
