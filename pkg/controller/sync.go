package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	// catchUpRequeue: while a step waits on Settled and every member not
	// current is at most nearlyCurrentLag operations behind its leader
	// (catchUps), observe again after this: under writes a follower
	// is a few operations behind at most moments, and a second between
	// looks made a step wait a second for a gate that was open most of it
	// (hack/bench-rollout.sh: gate-to-step 1.008 s with 5 servers); 100 ms
	// between looks left one step of 15 at 0.107 s, over the 0.1 s target
	// of issue 37. The cost, only in that window: an observation (4
	// requests per server) every 50 ms, and a status write when the lag in
	// its message moves. Further behind, catchUps looks about when the lag
	// will be gone at the rate it shrinks, never sooner than this.
	catchUpRequeue = 50 * time.Millisecond
	// podWaitRequeue: while a step waits at the gate and a server's pod is
	// not Ready (a restart in progress), observe every 5 s: the pod's own
	// events (created, started, Ready) sync the cluster at once, and the
	// gate cannot open before that pod is Ready. With 100 clusters rolling
	// at once, observing each every second was most of the controller's
	// CPU (8 s of a 42 s fleet change on 2 cores, beside the API server and
	// 100 restarting servers; hack/bench-scale.sh).
	podWaitRequeue = 5 * time.Second
	// nearlyCurrentLag is how far behind (Raft operations) a member may be
	// for the cluster to count as nearly settled; a member catching up a
	// stream that far behind takes more than catchUpRequeue to get current.
	nearlyCurrentLag = 100
	// DefaultRestRequeue: Settled, up to date and holding nothing, observe every
	// 2 minutes. An observation asks each server 4 monitoring endpoints
	// (/varz, /jsz, /routez, /healthz), so at rest that is 1 request per
	// server per 30 s (the scale target of issue 21; every 30 s it was 4).
	// A server that restarts or fails its readiness probe (every 5 s)
	// changes its pod, whose event syncs the cluster at once; only a
	// change the pod does not show (a stream falling behind) is seen up to
	// 2 minutes late. --rest-requeue changes it (Options.RestRequeue).
	DefaultRestRequeue = 2 * time.Minute
)

// requeueAfter is when a sync that decided d on an observation whose
// verdict is v looks again, when nothing else makes it sooner: within a
// second while a rollout moves (d.Soon), rest when the cluster is at rest
// (Settled, Progressing=False UpToDate, no hold), else heldRequeue. An
// up-to-date cluster that is not settled yet, holding nothing, is settling:
// its rollout (or creation) ended sinceProgressing ago and its last server
// is catching up, which no pod event announces. It is looked at again after
// a quarter of that time, at least inFlightRequeue and at most heldRequeue,
// so Settled and the servers' versions in status follow the catch-up within
// about a second (before, hack/bench-rollout.sh measured once, in two
// full runs, a 3-server cluster reported Settled and UpToDate 30.1 s after
// its last server was current: the heldRequeue), and a cluster that stays
// unsettled is back to one observation every 30 s two minutes after its
// rollout.
func requeueAfter(d rollout.Decision, v observe.Verdict, rest, sinceProgressing time.Duration) time.Duration {
	upToDate := d.Hold == nil && d.Progressing.Status == metav1.ConditionFalse && d.Progressing.Reason == clusterv1beta1.ReasonUpToDate
	switch {
	case d.Soon:
		return inFlightRequeue
	case upToDate && v.Settled():
		return rest
	case upToDate:
		return min(heldRequeue, max(inFlightRequeue, sinceProgressing/4))
	}
	return heldRequeue
}

// renewBy is requeue, or sooner when the minted system user is due before
// then (renew, zero without one): the sync renews it at its due time, not
// at whatever event comes next. Never sooner than a second.
func renewBy(requeue time.Duration, renew, now time.Time) time.Duration {
	if renew.IsZero() {
		return requeue
	}
	return min(requeue, max(renew.Sub(now), time.Second))
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

// sync reconciles one NatsCluster in its phases (see gather.go): gather,
// observe, decide (prepare), then write (what the plan allows) and report
// (status, Events, metrics) (the finish prepare returns). It returns when
// to look again. The workers run the two halves apart (processNextWorkItem):
// a worker prepares, and the writes go on without it.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	start := time.Now()
	defer func() { klog.FromContext(ctx).V(4).Info("Finished syncing", "duration", time.Since(start)) }()
	finish, requeue, err := c.prepare(ctx, key)
	if finish == nil {
		return requeue, err
	}
	return finish(ctx)
}

// finishFunc writes what a prepared sync decided and reports it; it returns
// when to look again.
type finishFunc func(ctx context.Context) (time.Duration, error)

// prepare gathers, observes and decides; what is left to do (the writes and
// the report) is the returned finish, nil when the sync ends here (with
// requeue and err).
func (c *Controller) prepare(ctx context.Context, key cache.ObjectName) (finishFunc, time.Duration, error) {
	logger := klog.FromContext(ctx)
	nc, err := c.gatherer.gatherCluster(key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		logger.V(4).Info("NatsCluster is gone; owned objects are left to the garbage collector")
		c.observer.Forget(key.String())
		c.ownWrites.forget(key)
		c.metrics.forget(key)
		c.catchUps.forget(key)
		c.gatherer.systemUsers.forgetCluster(key.Namespace, key.Name)
		c.gatherer.minted.forget(key.Namespace + "/" + key.Name)
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if c.ownWrites.cacheBehind(key, nc.ResourceVersion, time.Now()) {
		logger.V(4).Info("The cache has not seen this controller's last write yet; looking again shortly", "resourceVersion", nc.ResourceVersion)
		return nil, cacheBehindRequeue, nil
	}

	if nc.DeletionTimestamp != nil && !hasFinalizer(nc) {
		logger.V(4).Info("NatsCluster is being deleted and holds no finalizer of this controller; left to the API server and the garbage collector")
		return nil, 0, nil
	}

	// Gather, observe, decide.
	now := metav1.Now()
	f, err := c.gatherer.gather(ctx, nc, now.Time)
	if err != nil {
		return nil, 0, err
	}
	var checkFacts func()
	if c.checkFacts != nil {
		clone := f.clone()
		checkFacts = func() { c.checkFacts(f, clone) }
	}
	snap := c.observer.Observe(ctx, observeTarget(f))
	p := decide(f, snap, c.decideOptions(now))
	if f.nc.Spec.Gateway != nil && c.observer.ViewRemoteMetaLeader(ctx, p.reloadVia, snap) {
		// The meta leader is a server of another cluster of the
		// supercluster, asked over the $SYS access decide chose.
		p = decide(f, snap, c.decideOptions(now))
	}
	if f.nc.Spec.Gateway == nil {
		snap, p, now = c.lookAgainAtOnce(ctx, key, f, snap, p, now)
	}
	return func(ctx context.Context) (time.Duration, error) {
		if checkFacts != nil {
			defer checkFacts()
		}
		return c.finish(ctx, key, f, snap, p, now)
	}, 0, nil
}

// finish writes what the plan allows and reports it (status, Events,
// metrics); it returns when to look again.
func (c *Controller) finish(ctx context.Context, key cache.ObjectName, f *facts, snap *observe.Snapshot, p plan, now metav1.Time) (time.Duration, error) {
	decision := p.decision

	// Write.
	if decision.ReleaseFinalizer {
		// The NatsCluster goes: no status to write.
		return 0, c.releaseFinalizer(ctx, &p)
	}
	w, err := c.write(ctx, &p)
	if err != nil {
		return 0, err
	}
	nc, refused := w.nc, w.refused
	if w.stepTaken {
		// The status of the step once taken: what the sync after it
		// decides while it waits for the server to run the target.
		decision = decision.OnceTaken()
	}

	// Report.
	status := nc.Status.DeepCopy()
	status.ObservedGeneration = nc.Generation
	status.Replicas = nc.Spec.Replicas
	status.Endpoints = &clusterv1beta1.Endpoints{
		Client: fmt.Sprintf("%s://%s.%s.svc:4222", clientScheme(nc), nc.Name, nc.Namespace),
		// https under spec.monitoring.tls (the certificate is the client
		// Service's, <name>.<ns>.svc).
		Monitor: fmt.Sprintf("%s://%s-headless.%s.svc:8222", render.MonitorScheme(&nc.Spec), nc.Name, nc.Namespace),
	}
	c.observedStatus(status, f, snap)
	c.recordStartProblems(nc, status.Servers)
	c.applyDecision(status, nc, p.out, decision)
	status.SystemAccess = systemAccessStatus(f, p.input)
	notify := decision.Hold != nil && decision.Hold.Notify
	if w.waiting != "" {
		// The step was not taken: the same reason, the budget's words.
		c.setCondition(status, nc, clusterv1beta1.ConditionProgressing, metav1.ConditionTrue, decision.Progressing.Reason, w.waiting)
	}
	if refused != "" {
		c.setCondition(status, nc, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, clusterv1beta1.ReasonReconcileFailed, refused)
		notify = true
	}
	if nc.DeletionTimestamp == nil {
		c.objectsWritten(status, nc, w.failed)
	}
	c.trustCurrent(status, nc, p.out)
	c.superclusterKeep(ctx, nc, p.facts.supercluster, decision)
	c.metrics.recordDecision(key, decision, now.Time)
	if r := decision.Rollout; r != nil && r.Gate != nil && r.Gate.WaitingFor != "" && decision.Step == nil {
		// What each look that found the gate closed waited for, to read
		// a step's gate-to-step time from the log (hack/bench-rollout.sh).
		klog.FromContext(ctx).V(4).Info("Waiting at the gate", "for", r.Gate.WaitingFor, "progressing", decision.Progressing.Message, "lookedAt", now.Time, "lookTook", snap.Took)
	}
	c.recordHoldTransition(nc, meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing),
		meta.FindStatusCondition(status.Conditions, clusterv1beta1.ConditionProgressing), notify)
	var sinceProgressing time.Duration
	if p := meta.FindStatusCondition(status.Conditions, clusterv1beta1.ConditionProgressing); p != nil {
		sinceProgressing = now.Sub(p.LastTransitionTime.Time)
	}
	requeue := requeueAfter(decision, snap.Verdict, c.restRequeue, sinceProgressing)
	if waitsForAPod(decision, p.input) {
		requeue = max(requeue, podWaitRequeue)
	}
	if wait, ok := c.catchUps.next(key, decision, snap, now.Time); ok {
		requeue = min(requeue, wait)
	}
	if len(w.failed) > 0 {
		requeue = min(requeue, heldRequeue)
	}
	if s := decision.Step; s != nil && s.Kind == rollout.Reload && s.Reload != nil && !s.Reload.Confirmed {
		// A reload waiting for its server to report the target: look again
		// when the request is due to be resent (backing off from
		// reloadFirstResend), so a reload that took is confirmed within
		// that, not a second later.
		requeue = min(requeue, max(c.reloadSends.untilDue(reloadKey(nc, s.Reload), time.Now()), cacheCatchUp))
	}
	return renewBy(requeue, f.systemCredsRenew, now.Time), c.writeStatus(ctx, nc, status)
}

// objectsWritten sets ObjectsWritten from the optional writes that failed,
// and emits a Warning Event when a failure starts or its words change.
func (c *Controller) objectsWritten(status *clusterv1beta1.NatsClusterStatus, nc *clusterv1beta1.NatsCluster, failed []string) {
	if len(failed) == 0 {
		c.setCondition(status, nc, clusterv1beta1.ConditionObjectsWritten, metav1.ConditionTrue, clusterv1beta1.ReasonAllWritten,
			"every supporting object is written")
		return
	}
	msg := strings.Join(failed, "; ") + "; the servers' rollout goes on without them, and the writes are tried again every 30 s"
	if prev := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionObjectsWritten); prev == nil || prev.Message != msg {
		c.recorder.Event(nc, corev1.EventTypeWarning, clusterv1beta1.ReasonWriteFailed, msg)
	}
	c.setCondition(status, nc, clusterv1beta1.ConditionObjectsWritten, metav1.ConditionFalse, clusterv1beta1.ReasonWriteFailed, msg)
}

// decideOptions are the controller's settings for decide at now.
func (c *Controller) decideOptions(now metav1.Time) decideOptions {
	return decideOptions{controllerNamespace: c.controllerNamespace, reloadTimeout: c.reloadTimeout, podTemplatePolicy: c.podTemplatePolicy, now: now}
}

// clientScheme is tls with client TLS, else nats.
func clientScheme(nc *clusterv1beta1.NatsCluster) string {
	if nc.Spec.TLS != nil {
		return "tls"
	}
	return "nats"
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
		return
	}
	// A rollout that restarts servers says why from its first step on, not
	// only once it is done: status.config.restartReason is the reason of the
	// restart in progress, while revision and appliedBy stay those of the
	// last revision every server ran until the rollout converges.
	if r := d.Rollout; r != nil && r.RestartReason != "" {
		if status.Config == nil {
			status.Config = &clusterv1beta1.ConfigStatus{}
		}
		status.Config.RestartReason = r.RestartReason
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
	logger := klog.FromContext(ctx)
	logger.V(2).Info("Updated status", "changed", statusChanges(&nc.Status, status))
	if v := logger.V(4); v.Enabled() {
		if s := meta.FindStatusCondition(status.Conditions, clusterv1beta1.ConditionSettled); s != nil {
			v.Info("Settled is now", "reason", s.Reason, "message", s.Message)
		}
	}
	return nil
}

func (c *Controller) countWrite(resource, verb string) {
	c.metrics.APIWrites.WithLabelValues(resource, verb).Inc()
}

// trustCurrent sets TrustCurrent from the JWTs render found expiring within
// 7 days (with spec.auth, when the target rendered; without spec.auth the
// condition goes), and emits a Warning Event when the warning starts or
// its words change.
func (c *Controller) trustCurrent(status *clusterv1beta1.NatsClusterStatus, nc *clusterv1beta1.NatsCluster, out *render.Output) {
	if nc.Spec.Auth == nil {
		meta.RemoveStatusCondition(&status.Conditions, clusterv1beta1.ConditionTrustCurrent)
		return
	}
	if out == nil {
		return // not rendered: Progressing says why (an expired JWT is TrustInvalid)
	}
	if len(out.TrustExpiring) == 0 {
		c.setCondition(status, nc, clusterv1beta1.ConditionTrustCurrent, metav1.ConditionTrue, clusterv1beta1.ReasonJWTsCurrent,
			"no JWT of the trust expires within 7 days")
		return
	}
	msg := strings.Join(out.TrustExpiring, "; ")
	if prev := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionTrustCurrent); prev == nil || prev.Message != msg {
		c.recorder.Event(nc, corev1.EventTypeWarning, clusterv1beta1.ReasonJWTExpiresSoon, msg)
	}
	c.setCondition(status, nc, clusterv1beta1.ConditionTrustCurrent, metav1.ConditionFalse, clusterv1beta1.ReasonJWTExpiresSoon, msg)
}

// waitsForAPod says the decision waits at the gate, with no step taken,
// while the pod of a server is missing or not Ready: that pod's events
// bring the next sync, so polling can wait (podWaitRequeue).
func waitsForAPod(d rollout.Decision, in rollout.Input) bool {
	if d.Step != nil || d.Hold != nil || d.Rollout == nil || d.Rollout.Gate == nil || d.Rollout.Gate.WaitingFor == "" {
		return false
	}
	return slices.ContainsFunc(in.Servers, func(s rollout.ServerState) bool {
		return s.Created && !s.Stopped && (!s.PodExists || !s.PodReady)
	})
}
