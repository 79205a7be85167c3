package controller

// Config reloads and the system access they need. A Reload step (the
// planner decides it, rollout/reload.go) records the reload on the server's
// StatefulSet (AnnotationReload: "<revision> Started <time>"), writes its
// ConfigMap, and asks the server over $SYS to reload
// ($SYS.REQ.SERVER.<id>.RELOAD). A kubelet updates a mounted ConfigMap
// within about a minute, and until then the server reloads the old file, so
// the step is taken again on later syncs (the request resent at most every
// reloadResendEvery) until the server reports its target revision; then the
// annotation says Done. When nats-server answers with an error the
// annotation says Refused with its words, and the planner restarts the
// server instead.
//
// The controller reaches $SYS with spec.auth.systemCredentials, a user it
// minted with the NatsOperatorTrust's signing key (gather_minted.go), or,
// on a cluster without auth, as its own system user (systemuser.go),
// connecting only to servers whose running config has that user: a server
// without it would silently take the connection into $G. status.systemAccess
// says which, and what that enables.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/pkg/act"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// DefaultReloadTimeout is how long a reloaded server may take to report its
// new revision before the reload becomes a restart: a kubelet's sync period
// (1 minute) plus its ConfigMap cache TTL, with room to spare.
const DefaultReloadTimeout = 2 * time.Minute

// reloadResendEvery is how often a reload in flight is asked again while
// the server still reports its old revision (the mounted file not updated).
const reloadResendEvery = 5 * time.Second

// Reasons of reload Events.
const (
	eventServerReloaded = clusterv1beta1.EventServerReloaded
	eventReloadRefused  = clusterv1beta1.EventReloadRefused
)

// systemUser is the controller's system user as its Secret holds it.
type systemUser struct {
	user, password string
	// seed is the user's nkey seed; nil for a Secret of an earlier release
	// not upgraded yet (then render.NKey is empty too).
	seed   []byte
	render *render.SystemUser
}

// createSystemUserSecret creates the system user Secret chosen by this
// sync, or updates the one of an earlier release with its nkey seed
// added, before any object that renders it.
func (c *Controller) createSystemUserSecret(ctx context.Context, p *plan) error {
	s := p.systemUserSecret
	if s == nil {
		return nil
	}
	if s.ResourceVersion != "" {
		_, err := c.kubeClient.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{FieldManager: FieldManager})
		c.countWrite("secrets", "update")
		if err != nil {
			return writeError("updating", "Secret", s, err)
		}
		klog.FromContext(ctx).V(2).Info("Added an nkey to the system user Secret", "secret", klog.KObj(s))
		return nil
	}
	_, err := c.kubeClient.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{FieldManager: FieldManager})
	c.countWrite("secrets", "create")
	if err != nil {
		// AlreadyExists: the cache had not seen it yet; the next sync reads it.
		return writeError("creating", "Secret", s, err)
	}
	klog.FromContext(ctx).V(2).Info("Created the system user Secret", "secret", klog.KObj(s))
	return nil
}

// parseReload reads a StatefulSet's reload annotation; zero when absent or
// unreadable (an unreadable one is as good as none: the planner then
// decides afresh).
func parseReload(sts *metav1.ObjectMeta) rollout.ServerReload {
	v, ok := sts.Annotations[clusterv1beta1.AnnotationReload]
	if !ok {
		return rollout.ServerReload{}
	}
	parts := strings.SplitN(v, " ", 4)
	if len(parts) < 3 {
		return rollout.ServerReload{}
	}
	at, err := time.Parse(time.RFC3339, parts[2])
	if err != nil {
		return rollout.ServerReload{}
	}
	r := rollout.ServerReload{Revision: parts[0], Phase: rollout.ReloadPhase(parts[1]), Since: metav1.NewTime(at)}
	if len(parts) == 4 {
		r.Message = parts[3]
	}
	switch r.Phase {
	case rollout.ReloadStarted, rollout.ReloadDone, rollout.ReloadRefused:
		return r
	}
	return rollout.ServerReload{}
}

// formatReload is the reload annotation's value.
func formatReload(rev string, phase rollout.ReloadPhase, at time.Time, msg string) string {
	v := rev + " " + string(phase) + " " + at.UTC().Format(time.RFC3339)
	if msg != "" {
		v += " " + strings.ReplaceAll(msg, "\n", " ")
	}
	return v
}

// pacer remembers when a request was last sent, per key (server and
// revision of a reload, server and phase of a removal), so a request whose
// effect the cluster does not show yet is resent with a backoff: first
// after first, then doubling up to every reloadResendEvery. The zero pacer
// resends every reloadResendEvery.
type pacer struct {
	// first is the gap after the first send; zero means reloadResendEvery.
	first time.Duration
	mu    sync.Mutex
	sent  map[string]pacerEntry
}

type pacerEntry struct {
	last time.Time
	gap  time.Duration
}

// reloadFirstResend is the gap after the first reload request of a server
// onto a revision: a file the kubelet updates within a second (the local
// node, a ConfigMap staged a step earlier) is reloaded within about that,
// not after reloadResendEvery (hack/bench-rollout.sh: a server-tag change
// took about 6 s a server when every resend waited 5 s).
const reloadFirstResend = 250 * time.Millisecond

// pacerForget is how long a key nothing asked about is remembered; long
// enough that a backoff at reloadResendEvery is not started over.
const pacerForget = 10 * reloadResendEvery

// due says whether the request of key should be sent now, and records it.
func (r *pacer) due(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent == nil {
		r.sent = map[string]pacerEntry{}
	}
	e, ok := r.sent[key]
	if ok && now.Sub(e.last) < e.gap {
		return false
	}
	// Keys of servers, revisions and clusters that are gone would
	// otherwise stay forever; one forgotten is only sent at once.
	for k, o := range r.sent {
		if now.Sub(o.last) >= pacerForget {
			delete(r.sent, k)
		}
	}
	switch {
	case !ok || r.first <= 0:
		e.gap = cmp.Or(r.first, reloadResendEvery)
	default:
		e.gap = min(2*e.gap, reloadResendEvery)
	}
	e.last = now
	r.sent[key] = e
	return true
}

// untilDue is how long until key is due again; zero when it is due now or
// was never sent.
func (r *pacer) untilDue(key string, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.sent[key]
	if !ok {
		return 0
	}
	return max(0, e.last.Add(e.gap).Sub(now))
}

// reloadKey is a reload's key in reloadSends.
func reloadKey(nc *clusterv1beta1.NatsCluster, r *rollout.ReloadStep) string {
	return nc.Namespace + "/" + nc.Name + "/" + r.Server + "/" + r.Revision
}

// reload executes a Reload step.
func (c *Controller) reload(ctx context.Context, p *plan, step *rollout.Step) error {
	r := step.Reload
	if r == nil {
		return errors.New("the planner asked for a Reload step without its payload")
	}
	nc := p.facts.nc
	i, ok := render.ServerOrdinal(nc.Name, r.Server)
	if !ok || int(i) >= len(p.facts.servers) || p.facts.servers[i].statefulSet == nil {
		return fmt.Errorf("planner reloads unknown server %q", r.Server)
	}
	so, target := &p.facts.servers[i], &p.out.Servers[i]
	logger := klog.FromContext(ctx).WithValues("server", r.Server, "revision", r.Revision)
	cur := parseReload(&so.statefulSet.ObjectMeta)
	now := time.Now()
	if r.Confirmed {
		if err := c.annotateReload(ctx, so.statefulSet, formatReload(r.Revision, rollout.ReloadDone, now, "")); err != nil {
			return err
		}
		c.recorder.Eventf(nc, corev1.EventTypeNormal, eventServerReloaded, "Reloaded %s onto revision %s without a restart", r.Server, r.Revision)
		return nil
	}
	if cur.Revision != r.Revision || cur.Phase != rollout.ReloadStarted {
		if err := c.annotateReload(ctx, so.statefulSet, formatReload(r.Revision, rollout.ReloadStarted, now, "")); err != nil {
			return err
		}
	}
	if so.configMap == nil || configMapDiffers(so.configMap, target.ConfigMap) {
		if err := c.writeConfigMap(ctx, so.configMap, target.ConfigMap); err != nil {
			return err
		}
	}
	if !c.reloadSends.due(reloadKey(nc, r), now) {
		c.stage(ctx, p, r.Stage)
		return nil
	}
	sys, err := c.observer.System(ctx, p.reloadVia)
	if err == nil {
		err = act.Reload(ctx, sys, r.Server)
	}
	// After the request: this server's reload does not wait for the
	// others' writes.
	defer c.stage(ctx, p, r.Stage)
	var refused *act.ReloadRefusedError
	switch {
	case errors.As(err, &refused):
		logger.Info("nats-server refused to reload its config", "error", refused.Message)
		if err := c.annotateReload(ctx, so.statefulSet, formatReload(r.Revision, rollout.ReloadRefused, now, refused.Message)); err != nil {
			return err
		}
		c.recorder.Eventf(nc, corev1.EventTypeWarning, eventReloadRefused, "nats-server refused to reload %s onto revision %s: %s; restarting it instead",
			r.Server, r.Revision, refused.Message)
	case err != nil:
		// Not an answer: asked again on a later sync, until the timeout
		// turns the reload into a restart.
		logger.V(2).Info("Could not send the reload yet", "error", err)
	default:
		logger.V(2).Info("Asked the server to reload its config")
	}
	return nil
}

// maxStagedConfig is the largest config kept in AnnotationStagedFrom (the
// API server allows 256 KiB of annotations per object); a server whose
// config is larger is not staged, and its ConfigMap is written at its own
// step.
const maxStagedConfig = 128 << 10

// stage writes the target ConfigMap of each named server ahead of its
// reload (rollout.ReloadStep.Stage), keeping the config it runs in
// AnnotationStagedFrom. It is only ahead of time: a server not staged
// (a write that fails, a config too large, a route CA that changes with it,
// which its ConfigMap's annotation must keep saying until the server runs
// it) gets its ConfigMap at its own step, so a failure is logged, not
// returned.
func (c *Controller) stage(ctx context.Context, p *plan, names []string) {
	logger := klog.FromContext(ctx)
	for _, name := range names {
		i, ok := render.ServerOrdinal(p.facts.nc.Name, name)
		if !ok || int(i) >= len(p.facts.servers) || int(i) >= len(p.out.Servers) {
			continue
		}
		so, want := &p.facts.servers[i], p.out.Servers[i].ConfigMap
		got := so.configMap
		if got == nil || so.statefulSet == nil || want == nil ||
			got.Annotations[clusterv1beta1.AnnotationRoutesCA] != want.Annotations[clusterv1beta1.AnnotationRoutesCA] {
			continue
		}
		runs, staged := got.Annotations[clusterv1beta1.AnnotationStagedFrom]
		if !staged {
			runs = got.Data[render.ConfigKey]
		}
		if runs == "" || len(runs) > maxStagedConfig {
			logger.V(2).Info("Not staging the config of a server: the config it runs is empty or too large to keep in an annotation", "server", name, "bytes", len(runs))
			continue
		}
		if err := c.updateConfigMap(ctx, got, want, runs); err != nil {
			logger.V(2).Info("Could not stage the config of a server; it is written at its own step", "server", name, "err", err)
			continue
		}
		logger.V(2).Info("Staged the config of a server ahead of its reload", "server", name)
	}
}

// stagedRevision is the revision of the config staged in a server's
// ConfigMap ahead of its reload; empty when none is.
func stagedRevision(cm *corev1.ConfigMap) string {
	if cm == nil {
		return ""
	}
	if _, ok := cm.Annotations[clusterv1beta1.AnnotationStagedFrom]; !ok {
		return ""
	}
	rc, err := render.ReadConfig([]byte(cm.Data[render.ConfigKey]), "")
	if err != nil {
		return ""
	}
	return rc.Revision
}

// annotateReload writes the reload annotation on a server's StatefulSet with
// a merge patch of its metadata: the pod template is not touched, so
// nothing restarts.
func (c *Controller) annotateReload(ctx context.Context, sts *appsv1.StatefulSet, value string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, clusterv1beta1.AnnotationReload, value)
	_, err := c.kubeClient.AppsV1().StatefulSets(sts.Namespace).Patch(ctx, sts.Name, types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: FieldManager})
	c.countWrite("statefulsets", "patch")
	if err != nil {
		return writeError("annotating", "StatefulSet", sts, err)
	}
	return nil
}

// systemAccessStatus is status.systemAccess: whose user the controller
// reaches $SYS with, and the operations that enables (every one of
// clusterv1beta1.SystemOperations once it can; none, with the reason, until
// then).
func systemAccessStatus(f *facts, in rollout.Input) *clusterv1beta1.SystemAccessStatus {
	via := clusterv1beta1.SystemAccessControllerUser
	switch {
	case f.nc.Spec.Auth != nil && f.systemCredsMinted:
		via = clusterv1beta1.SystemAccessMintedUser
	case f.nc.Spec.Auth != nil && len(f.systemCreds) > 0:
		via = clusterv1beta1.SystemAccessSystemCredentials
	case f.nc.Spec.Auth != nil:
		via = clusterv1beta1.SystemAccessNone
	}
	if !in.CanReload {
		return &clusterv1beta1.SystemAccessStatus{Via: via, Message: in.NoReload + "; until then config changes restart the servers, and scale-down and replace-server hold"}
	}
	return &clusterv1beta1.SystemAccessStatus{Via: via, Operations: slices.Clone(clusterv1beta1.SystemOperations)}
}
