package controller

// One rollout at a time across a supercluster. The JetStream meta group of
// a supercluster spans every member cluster, so a server of east and one of
// west restarting together take two of its peers at once, which no gate of
// either cluster alone sees coming. The members of a supercluster (the
// NatsClusters with spec.gateway that reach each other through gateway
// remotes by clusterRef, gatherSupercluster) take turns through one Lease
// of their own in the controller's Lease namespace (that of its leader
// election), named after the first member: a cluster takes it before it
// restarts a server (a restart step, restart-all, or a server removal) and
// keeps it while its rollout takes steps, so another member waits, with the
// holder named in Progressing. A member whose rollout takes no step of its
// own for now (done, held, paused, blocked at its gate, a server that
// cannot start, a migration waiting on its Job: Decision.KeepsTurn false) gives
// its turn up, so one stuck member stops no other; the gates over the
// shared meta group still keep two servers of the supercluster from being
// down at once. Superclusters that do not reach each other never wait for
// each other.

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// SuperclusterLeasePrefix begins the name of each supercluster's Lease, in
// the controller's Lease namespace: then 12 hex digits of the SHA-256 of its
// first member's namespace/name. The Lease's annotation AnnotationMembers
// lists the members.
const SuperclusterLeasePrefix = "nats-operator-supercluster-"

// AnnotationSuperclusterMembers on a supercluster Lease lists its members
// (namespace/name, comma-separated) as its last holder found them.
const AnnotationSuperclusterMembers = "cluster.nats-operator.io/supercluster-members"

// superclusterLeaseDuration is how long a holder's turn lasts without a
// renewal (a controller that died mid-rollout): every sync of a rolling
// cluster renews it once it is older than superclusterLeaseRenew.
const (
	superclusterLeaseDuration = 2 * time.Minute
	superclusterLeaseRenew    = 20 * time.Second
	// superclusterLeaseSeconds is superclusterLeaseDuration as the Lease
	// spells it.
	superclusterLeaseSeconds = int32(superclusterLeaseDuration / time.Second)
)

// superclusterWaitError is a restart that waits for another member of the
// supercluster to finish its rollout: a wait, reported in Progressing.
type superclusterWaitError struct {
	server, holder, lease string
	// failure is the API server's words when the Lease could not be read
	// or written: the step waits all the same.
	failure string
}

func (e *superclusterWaitError) Error() string {
	if e.failure != "" {
		return fmt.Sprintf("before restarting %s: waiting, the supercluster Lease %s cannot be taken: %s", e.server, e.lease, e.failure)
	}
	return fmt.Sprintf("before restarting %s: waiting for NatsCluster %s, which is rolling out: the members of a supercluster roll out one at a time (Lease %s), so that two servers of one supercluster never restart together",
		e.server, e.holder, e.lease)
}

// restarts says whether a step stops a server.
func restarts(step *rollout.Step) bool {
	switch step.Kind {
	case rollout.RestartOne, rollout.RestartAll, rollout.RemoveServer:
		return true
	}
	return false
}

// superclusterTurn takes (or keeps) the Lease of nc's supercluster (its
// members) before a step that stops server; a *superclusterWaitError when
// another member holds it.
func (c *Controller) superclusterTurn(ctx context.Context, nc *clusterv1beta1.NatsCluster, members []string, server string) error {
	leases := c.kubeClient.CoordinationV1().Leases(c.leaseNamespace)
	me, now, name := holderOf(nc), metav1.NewMicroTime(time.Now()), SuperclusterLeaseName(members)
	annotations := map[string]string{AnnotationSuperclusterMembers: strings.Join(members, ",")}
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		seconds := superclusterLeaseSeconds
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.leaseNamespace, Annotations: annotations},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &me, LeaseDurationSeconds: &seconds, AcquireTime: &now, RenewTime: &now, LeaseTransitions: new(int32(1))},
		}, metav1.CreateOptions{FieldManager: FieldManager})
		c.countWrite("leases", "create")
		if apierrors.IsAlreadyExists(err) {
			return &superclusterWaitError{server: server, holder: "(another member, just now)", lease: name}
		}
		return leaseFailure(server, name, err)
	}
	if err != nil {
		return leaseFailure(server, name, err)
	}
	if holder := leaseHolder(l); holder != "" && holder != me && !leaseExpired(l, now.Time) {
		return &superclusterWaitError{server: server, holder: holder, lease: name}
	}
	if leaseHolder(l) != me {
		l.Spec.AcquireTime = &now
		transitions := int32(1)
		if l.Spec.LeaseTransitions != nil {
			transitions += *l.Spec.LeaseTransitions
		}
		l.Spec.LeaseTransitions = &transitions
	}
	l.Spec.HolderIdentity, l.Spec.RenewTime = &me, &now
	seconds := superclusterLeaseSeconds
	l.Spec.LeaseDurationSeconds = &seconds
	l.Annotations = annotations
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: FieldManager})
	c.countWrite("leases", "update")
	if apierrors.IsConflict(err) {
		return &superclusterWaitError{server: server, holder: "(another member, just now)", lease: name}
	}
	return leaseFailure(server, name, err)
}

// superclusterKeep renews nc's turn while its rollout takes steps and
// gives it up once it takes none of its own (Decision.KeepsTurn false). It
// reads the Lease only for a cluster with a gateway (one whose gateway was
// removed mid-rollout, or whose supercluster changed, leaves its turn to
// expire).
func (c *Controller) superclusterKeep(ctx context.Context, nc *clusterv1beta1.NatsCluster, members []string, d rollout.Decision) {
	if nc.Spec.Gateway == nil {
		return
	}
	name := SuperclusterLeaseName(members)
	leases := c.kubeClient.CoordinationV1().Leases(c.leaseNamespace)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil || leaseHolder(l) != holderOf(nc) {
		return
	}
	now := metav1.NewMicroTime(time.Now())
	rolling := d.KeepsTurn && nc.DeletionTimestamp == nil
	switch {
	case !rolling:
		empty := ""
		l.Spec.HolderIdentity, l.Spec.RenewTime = &empty, &now
	case l.Spec.RenewTime == nil || now.Sub(l.Spec.RenewTime.Time) >= superclusterLeaseRenew:
		l.Spec.RenewTime = &now
	default:
		return
	}
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: FieldManager})
	c.countWrite("leases", "update")
	if err != nil {
		klog.FromContext(ctx).Info("Could not renew or give up the supercluster Lease; it expires by itself", "lease", name, "err", err)
	}
}

func holderOf(nc *clusterv1beta1.NatsCluster) string { return nc.Namespace + "/" + nc.Name }

func leaseHolder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leaseExpired: the holder has not renewed within the lease's duration.
func leaseExpired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// leaseFailure is a wait with the API server's words; nil without err.
func leaseFailure(server, lease string, err error) error {
	if err == nil {
		return nil
	}
	return &superclusterWaitError{server: server, lease: lease, failure: err.Error()}
}
