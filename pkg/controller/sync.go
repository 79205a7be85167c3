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
)

var everything = labels.Everything()

// collisionRequeue is how often a cluster blocked by an object it does not
// control is looked at again: such objects are outside the label-filtered
// caches, so no event announces their removal.
const collisionRequeue = 30 * time.Second

// notControlledError reports an object in the way that the controller does
// not control. It becomes Progressing=False ReconcileFailed, not a retry.
type notControlledError struct {
	kind, namespace, name string
}

func (e *notControlledError) Error() string {
	return fmt.Sprintf("%s %s/%s exists and is not controlled by this NatsCluster; rename or delete it, the controller will not overwrite it",
		e.kind, e.namespace, e.name)
}

// sync reconciles one NatsCluster. It returns how long to wait before the
// next look when nothing else will trigger one.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	start := time.Now()
	defer func() { logger.V(4).Info("Finished syncing", "duration", time.Since(start)) }()

	nc, err := c.clusters.NatsClusters(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("NatsCluster is gone; owned objects are left to the garbage collector")
		return 0, nil
	}
	if err != nil {
		return 0, err
	}

	status := nc.Status.DeepCopy()
	status.ObservedGeneration = nc.Generation
	status.Replicas = nc.Spec.Replicas
	status.Endpoints = &clusterv1beta1.Endpoints{
		Client:  fmt.Sprintf("nats://%s.%s.svc:4222", nc.Name, nc.Namespace),
		Monitor: fmt.Sprintf("http://%s-headless.%s.svc:8222", nc.Name, nc.Namespace),
	}

	var requeue time.Duration
	err = c.ensureSharedObjects(ctx, nc)
	var nce *notControlledError
	switch {
	case errors.As(err, &nce):
		c.setCondition(status, nc, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse,
			clusterv1beta1.ReasonReconcileFailed, nce.Error())
		requeue = collisionRequeue
	case err != nil:
		return 0, err
	default:
		if cond := meta.FindStatusCondition(status.Conditions, clusterv1beta1.ConditionProgressing); cond == nil || cond.Reason == clusterv1beta1.ReasonReconcileFailed {
			c.setCondition(status, nc, clusterv1beta1.ConditionProgressing, metav1.ConditionTrue,
				clusterv1beta1.ReasonCreating, fmt.Sprintf("creating %d servers", nc.Spec.Replicas))
		}
	}
	return requeue, c.writeStatus(ctx, nc, status)
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
	klog.FromContext(ctx).V(2).Info("Updated status")
	return nil
}

func (c *Controller) countWrite(resource, verb string) {
	c.metrics.APIWrites.WithLabelValues(resource, verb).Inc()
}
