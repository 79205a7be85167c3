package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// Observer is what the controller asks of the NATS servers
// (*observe.Observer); SetObserver replaces it, e.g. with a fixed Snapshot
// for a preview of a cluster that does not run.
type Observer = clusterObserver

// SetObserver replaces the controller's observer. Call it before Run.
func (c *Controller) SetObserver(o Observer) { c.observer = o }

// Preview is what one sync of a NatsCluster would decide, and what it read
// to decide it. Nothing is written to make it: kubectl nats plan shows it.
type Preview struct {
	// Output is the rendered target; nil when Input.Blocked says why the
	// spec, trust or references cannot render.
	Output *render.Output
	// Servers are the servers of the spec and beyond it, as the caches
	// hold their objects (nil when absent), in ordinal order.
	Servers []PreviewServer
	// Snapshot is what the servers reported.
	Snapshot *observe.Snapshot
	// Input and Decision are the planner's.
	Input    rollout.Input
	Decision rollout.Decision
	// Secrets are the Secrets the sync would create before anything else:
	// the system user's, generated route TLS.
	Secrets []*corev1.Secret
}

// PreviewServer is one server's objects as the caches hold them.
type PreviewServer struct {
	Name        string
	Ordinal     int32
	StatefulSet *appsv1.StatefulSet
	ConfigMap   *corev1.ConfigMap
	Pod         *corev1.Pod
}

// Decide runs the decide phase of a sync (gather, render, observe, plan) for
// nc, which need not be the NatsCluster the caches hold (a manifest to be
// applied, with the live one's status and annotations), and writes nothing.
// It is the same code a sync runs, so a preview and the controller cannot
// disagree on the same caches and observation.
func (c *Controller) Decide(ctx context.Context, nc *clusterv1beta1.NatsCluster, now metav1.Time) (*Preview, error) {
	st, out, snap, in, d, err := c.decide(ctx, nc, now)
	if err != nil {
		return nil, fmt.Errorf("deciding for NatsCluster %s/%s: %w", nc.Namespace, nc.Name, err)
	}
	p := &Preview{Output: out, Snapshot: snap, Input: in, Decision: d}
	for _, so := range append(append([]serverObjects(nil), st.servers...), st.extra...) {
		p.Servers = append(p.Servers, PreviewServer{Name: so.name, Ordinal: so.ordinal, StatefulSet: so.statefulSet, ConfigMap: so.configMap, Pod: so.pod})
	}
	if st.newSystemUserSecret != nil {
		p.Secrets = append(p.Secrets, st.newSystemUserSecret)
	}
	p.Secrets = append(p.Secrets, st.tlsSecrets...)
	return p, nil
}
