package controller

// write: what the plan allows, and nothing else. First the finalizer, then
// the supporting objects, one writer per kind, each with one
// create/correct/delete shape (they depend on the cluster's name and
// spec only, so they are kept in place even while the servers are held),
// then the servers to create, the one step, and the one-shot annotations
// to clear. While the NatsCluster is being deleted, nothing is written but
// the finalizer's release.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// writer writes one kind of supporting object as the plan says.
type writer struct {
	// what it writes, for the doc map and the tests.
	what  string
	write func(ctx context.Context, p *plan) error
	// optional: the servers run without it (they render nothing of it), so
	// a failed write (a webhook timing out, a 5xx, a refusal) is reported
	// in ObjectsWritten and the sync goes on to the servers and the step;
	// a write the servers need ends the sync's writes.
	optional bool
}

// writers are the supporting objects' writers, in the order they run: the
// Secrets and the Certificate before anything that renders them.
func (c *Controller) writers() []writer {
	return []writer{
		{"the system user Secret", c.createSystemUserSecret, false},
		{"the generated route TLS Secrets", c.writeTLS, false},
		{"the client Certificate (cert-manager)", c.writeCertificate, true},
		{"the Services and the PodDisruptionBudget", c.ensureSharedObjects, true},
		{"the NetworkPolicy", c.ensureNetworkPolicy, true},
		{"the PodMonitor (prometheus-operator)", c.ensurePodMonitor, true},
	}
}

// optionalFailure says whether err of an optional writer is reported and
// passed over: anything but an object in the way (ReconcileFailed, as for
// every object) and a conflict or an object the cache has not seen yet
// (retried at once).
func optionalFailure(err error) bool {
	var nce *notControlledError
	return !errors.As(err, &nce) && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err)
}

// writeResult is what write did that the report says.
type writeResult struct {
	// nc is the NatsCluster to write status to (patched when the finalizer
	// was added or annotations were set or cleared).
	nc *clusterv1beta1.NatsCluster
	// refused is, when the API server refused a write or an object is in
	// the way, the message for Progressing=False ReconcileFailed.
	refused string
	// failed are the optional writes that failed, each "<what>: <the API
	// server's words>", for ObjectsWritten.
	failed []string
	// waiting is, when the step was not taken because the
	// PodDisruptionBudget does not allow it now, the Progressing message.
	waiting string
	// stepTaken says the decision's step was taken.
	stepTaken bool
}

// write carries out what the plan allows (see writeResult). Any other
// error is retried.
func (c *Controller) write(ctx context.Context, p *plan) (writeResult, error) {
	r := writeResult{}
	var err error
	r.nc, r.refused, err = c.writeAll(ctx, p, &r)
	return r, err
}

func (c *Controller) writeAll(ctx context.Context, p *plan, r *writeResult) (*clusterv1beta1.NatsCluster, string, error) {
	nc, d := p.facts.nc, p.decision
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
	for _, w := range c.writers() {
		err := w.write(ctx, p)
		switch {
		case err == nil:
		case w.optional && optionalFailure(err):
			klog.FromContext(ctx).V(2).Info("An optional object could not be written; the servers go on", "what", w.what, "err", err)
			r.failed = append(r.failed, w.what+": "+err.Error())
		default:
			msg, err := refused(err)
			return nc, msg, err
		}
	}
	if len(d.Annotate) > 0 {
		// Before the servers it marks are created.
		patched, err := c.setAnnotations(ctx, nc, d.Annotate)
		if err != nil {
			return nc, "", err
		}
		nc = patched
	}
	if err := c.createServers(ctx, p, d.Create); err != nil {
		msg, err := refused(err)
		return nc, msg, err
	}
	if d.Step != nil && c.pauseBeforeStep > 0 {
		klog.FromContext(ctx).Info("Pausing before the step", "server", stepServer(d.Step), "kind", d.Step.Kind, "pause", c.pauseBeforeStep)
		select {
		case <-ctx.Done():
		case <-time.After(c.pauseBeforeStep):
		}
	}
	if d.Step != nil {
		var wait *disruptionWaitError
		var turn *superclusterWaitError
		var err error
		if nc.Spec.Gateway != nil && restarts(d.Step) {
			err = c.superclusterTurn(ctx, nc, p.facts.supercluster, stepServer(d.Step))
		}
		if err == nil {
			err = c.executeStep(ctx, p, d.Step, d.Progressing.Message)
		}
		switch {
		case errors.As(err, &turn):
			r.waiting = turn.Error()
			klog.FromContext(ctx).Info("The step waits for another member of the supercluster", "server", turn.server, "holder", turn.holder)
		case errors.As(err, &wait):
			r.waiting = wait.Error()
			klog.FromContext(ctx).Info("The step waits for the PodDisruptionBudget", "server", wait.server, "message", r.waiting)
		case err != nil:
			msg, err := refused(err)
			return nc, msg, err
		default:
			r.stepTaken = true
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

// releaseFinalizer removes the finalizer the planner released, so that the
// deletion goes on; the Event says why it was released.
func (c *Controller) releaseFinalizer(ctx context.Context, p *plan) error {
	f, d := p.facts, p.decision
	nc := f.nc
	if d.DeleteClaims {
		// Before the finalizer goes: afterwards nothing would delete them.
		for _, so := range append(slices.Clone(f.servers), f.extra...) {
			if err := c.deleteClaim(ctx, f, so.ordinal); err != nil {
				return err
			}
		}
		c.recorder.Eventf(nc, corev1.EventTypeNormal, clusterv1beta1.ReasonDeleting, "Deleting the claims of %d servers: spec.jetstream.volumeClaimTemplate.whenDeleted is Delete", len(f.servers)+len(f.extra))
	}
	if _, err := c.removeFinalizer(ctx, nc); err != nil {
		return err
	}
	c.recorder.Event(nc, corev1.EventTypeNormal, clusterv1beta1.ReasonDeleting, d.Progressing.Message)
	return nil
}

// stepServer is the server a step acts on first, for logs.
func stepServer(s *rollout.Step) string {
	switch {
	case len(s.Servers) > 0:
		return s.Servers[0]
	case s.Reload != nil:
		return s.Reload.Server
	case s.Remove != nil:
		return s.Remove.Server
	case s.Expand != nil:
		return s.Expand.Server
	}
	return ""
}
