package controller

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// The finalizer FinalizerStreams guards the deletion of a NatsCluster while
// JetStream holds streams: the garbage collector would delete every server
// with them. The controller adds it to every NatsCluster not being deleted,
// and removes it when the planner says so (Decision.ReleaseFinalizer: no
// streams, or force-delete); the API server then deletes the NatsCluster and
// the garbage collector its objects. The PersistentVolumeClaims stay (the
// claim templates retain them).

// hasFinalizer says the NatsCluster carries FinalizerStreams.
func hasFinalizer(nc *clusterv1beta1.NatsCluster) bool {
	return slices.Contains(nc.Finalizers, clusterv1beta1.FinalizerStreams)
}

// addFinalizer adds FinalizerStreams.
func (c *Controller) addFinalizer(ctx context.Context, nc *clusterv1beta1.NatsCluster) (*clusterv1beta1.NatsCluster, error) {
	return c.patchFinalizers(ctx, nc, append(slices.Clone(nc.Finalizers), clusterv1beta1.FinalizerStreams), "Added finalizer")
}

// removeFinalizer removes FinalizerStreams, and with it the last thing the
// controller holds the deletion by.
func (c *Controller) removeFinalizer(ctx context.Context, nc *clusterv1beta1.NatsCluster) (*clusterv1beta1.NatsCluster, error) {
	rest := slices.DeleteFunc(slices.Clone(nc.Finalizers), func(f string) bool { return f == clusterv1beta1.FinalizerStreams })
	return c.patchFinalizers(ctx, nc, rest, "Removed finalizer")
}

// patchFinalizers sets metadata.finalizers (see patchMetadata: a
// NatsCluster changed since the decision, another finalizer or force-delete
// set, makes the patch fail with a conflict and the sync run again).
func (c *Controller) patchFinalizers(ctx context.Context, nc *clusterv1beta1.NatsCluster, finalizers []string, done string) (*clusterv1beta1.NatsCluster, error) {
	if finalizers == nil {
		finalizers = []string{}
	}
	patched, err := c.patchMetadata(ctx, nc, "finalizers", finalizers)
	if err != nil {
		return nil, fmt.Errorf("setting finalizers %v of NatsCluster %s: %w", finalizers, klog.KObj(nc), err)
	}
	klog.FromContext(ctx).V(2).Info(done, "finalizer", clusterv1beta1.FinalizerStreams)
	return patched, nil
}
