package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
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

// patchFinalizers sets metadata.finalizers with a merge patch that carries
// the resourceVersion the decision was made on: if the NatsCluster changed
// since (another finalizer, force-delete set), the patch fails with a
// conflict and the sync runs again.
func (c *Controller) patchFinalizers(ctx context.Context, nc *clusterv1beta1.NatsCluster, finalizers []string, done string) (*clusterv1beta1.NatsCluster, error) {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"resourceVersion": nc.ResourceVersion, "finalizers": finalizers},
	})
	if err != nil {
		return nil, err
	}
	patched, err := c.natsClient.ClusterV1beta1().NatsClusters(nc.Namespace).Patch(ctx, nc.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	c.countWrite("natsclusters", "patch")
	if err != nil {
		return nil, fmt.Errorf("setting finalizers %v of NatsCluster %s: %w", finalizers, klog.KObj(nc), err)
	}
	c.ownWrites.wrote(cache.MetaObjectToName(nc), nc.ResourceVersion, time.Now())
	klog.FromContext(ctx).V(2).Info(done, "finalizer", clusterv1beta1.FinalizerStreams)
	return patched, nil
}
