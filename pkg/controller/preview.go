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

// Observer is what a preview asks of the NATS servers: *observe.Observer,
// or a fixed Snapshot for a cluster that does not run.
type Observer interface {
	Observe(ctx context.Context, t observe.Target) *observe.Snapshot
}

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

// Decide runs the phases of a sync that write nothing (gather through src,
// observe with obs, decide) for nc, which need not be the NatsCluster src
// holds (a manifest to be applied, with the live one's status and
// annotations). A sync runs the same functions, so a preview and the
// controller cannot disagree on the same objects and observation.
func Decide(ctx context.Context, src Sources, obs Observer, nc *clusterv1beta1.NatsCluster, now metav1.Time) (*Preview, error) {
	g := gatherer{src: src, systemUsers: &systemUserCache{}}
	f, err := g.gather(ctx, nc, now.Time)
	if err != nil {
		return nil, fmt.Errorf("deciding for NatsCluster %s/%s: %w", nc.Namespace, nc.Name, err)
	}
	snap := obs.Observe(ctx, observeTarget(f))
	p := decide(f, snap, decideOptions{reloadTimeout: DefaultReloadTimeout, now: now})
	pv := &Preview{Output: p.out, Snapshot: snap, Input: p.input, Decision: p.decision}
	for _, so := range append(append([]serverObjects(nil), f.servers...), f.extra...) {
		pv.Servers = append(pv.Servers, PreviewServer{Name: so.name, Ordinal: so.ordinal, StatefulSet: so.statefulSet, ConfigMap: so.configMap, Pod: so.pod})
	}
	if p.systemUserSecret != nil {
		pv.Secrets = append(pv.Secrets, p.systemUserSecret)
	}
	pv.Secrets = append(pv.Secrets, f.tlsSecrets...)
	return pv, nil
}
