package controller

// One rollout at a time across a supercluster. The JetStream meta group of
// a supercluster spans every member cluster, so a server of east and one of
// west restarting together take two of its peers at once, which no gate of
// either cluster alone sees coming. NatsClusters with spec.gateway take
// turns through one Lease in the controller's Lease namespace (that of its
// leader election): a cluster takes it
// before it restarts a server (a restart step, restart-all, or a server
// removal) and holds it while its rollout lasts (Progressing True), so
// another member waits, with the holder named in Progressing, until the
// first is done or held. It is one Lease for every NatsCluster with a
// gateway this controller runs, in whatever supercluster: rollouts of
// clusters with gateways are rare, and a Lease per supercluster would have
// to agree on who the members are before they are connected.

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// SuperclusterLeaseName is the Lease, in the controller's Lease namespace, that
// NatsClusters with spec.gateway hold while they roll out.
const SuperclusterLeaseName = "nats-operator-supercluster-rollout"

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
	server, holder string
	// failure is the API server's words when the Lease could not be read
	// or written: the step waits all the same.
	failure string
}

func (e *superclusterWaitError) Error() string {
	if e.failure != "" {
		return fmt.Sprintf("before restarting %s: waiting, the supercluster Lease %s cannot be taken: %s", e.server, SuperclusterLeaseName, e.failure)
	}
	return fmt.Sprintf("before restarting %s: waiting for NatsCluster %s, which is rolling out: NatsClusters with a gateway roll out one at a time (Lease %s), so that two servers of one supercluster never restart together",
		e.server, e.holder, SuperclusterLeaseName)
}

// restarts says whether a step stops a server.
func restarts(step *rollout.Step) bool {
	switch step.Kind {
	case rollout.RestartOne, rollout.RestartAll, rollout.RemoveServer:
		return true
	}
	return false
}

// superclusterTurn takes (or keeps) the Lease for nc before a step that
// stops server; a *superclusterWaitError when another cluster holds it.
func (c *Controller) superclusterTurn(ctx context.Context, nc *clusterv1beta1.NatsCluster, server string) error {
	leases := c.kubeClient.CoordinationV1().Leases(c.leaseNamespace)
	me, now := holderOf(nc), metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, SuperclusterLeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		seconds := superclusterLeaseSeconds
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: SuperclusterLeaseName, Namespace: c.leaseNamespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &me, LeaseDurationSeconds: &seconds, AcquireTime: &now, RenewTime: &now, LeaseTransitions: new(int32(1))},
		}, metav1.CreateOptions{FieldManager: FieldManager})
		c.countWrite("leases", "create")
		if apierrors.IsAlreadyExists(err) {
			return &superclusterWaitError{server: server, holder: "(another member, just now)"}
		}
		return leaseFailure(server, err)
	}
	if err != nil {
		return leaseFailure(server, err)
	}
	if holder := leaseHolder(l); holder != "" && holder != me && !leaseExpired(l, now.Time) {
		return &superclusterWaitError{server: server, holder: holder}
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
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: FieldManager})
	c.countWrite("leases", "update")
	if apierrors.IsConflict(err) {
		return &superclusterWaitError{server: server, holder: "(another member, just now)"}
	}
	return leaseFailure(server, err)
}

// superclusterKeep renews nc's turn while its rollout lasts and gives it
// up once it is done or held (Progressing False, or paused). It reads the
// Lease only for a cluster with a gateway (one whose gateway was removed
// mid-rollout leaves its turn to expire).
func (c *Controller) superclusterKeep(ctx context.Context, nc *clusterv1beta1.NatsCluster, d rollout.Decision) {
	if nc.Spec.Gateway == nil {
		return
	}
	leases := c.kubeClient.CoordinationV1().Leases(c.leaseNamespace)
	l, err := leases.Get(ctx, SuperclusterLeaseName, metav1.GetOptions{})
	if err != nil || leaseHolder(l) != holderOf(nc) {
		return
	}
	now := metav1.NewMicroTime(time.Now())
	rolling := d.Progressing.Status == metav1.ConditionTrue && d.Progressing.Reason != clusterv1beta1.ReasonRolloutPaused && nc.DeletionTimestamp == nil
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
		klog.FromContext(ctx).Info("Could not renew or give up the supercluster Lease; it expires by itself", "lease", SuperclusterLeaseName, "err", err)
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
func leaseFailure(server string, err error) error {
	if err == nil {
		return nil
	}
	return &superclusterWaitError{server: server, failure: err.Error()}
}
