package controller

// decide: a pure function of the gathered facts and the observation. It
// renders the target (render.Render), turns facts, target and observation
// into the planner's input, asks the planner (rollout.Plan) for its
// Decision, and says which supporting objects to write. It reads nothing,
// writes nothing and does not read the clock (now comes in the options);
// kubectl nats plan runs the same function (preview.go).

import (
	"errors"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// plan is everything one sync decided: what it decided on (the facts and
// the observation), the rendered target, the planner's input and Decision,
// and the supporting objects to write before anything that renders them.
type plan struct {
	facts *facts
	snap  *observe.Snapshot
	// out is the rendered target; nil when input.Blocked says why it
	// cannot be rendered.
	out      *render.Output
	input    rollout.Input
	decision rollout.Decision
	// systemUserSecret is the system user Secret to create (the fresh one
	// gather made, chosen by chooseSystemUser); nil when none is.
	systemUserSecret *corev1.Secret
	// systemUser is the system user rendered (nil when none is).
	systemUser *systemUser
	// certificate is the client Certificate to create or update.
	certificate *unstructured.Unstructured
	// reloadVia is the $SYS target reloads and removals are sent through.
	reloadVia observe.Target
}

// decideOptions are the controller's settings decide uses.
type decideOptions struct {
	// controllerNamespace: NetworkPolicies admit monitoring from it.
	controllerNamespace string
	// reloadTimeout: how long a reload may go unconfirmed.
	reloadTimeout time.Duration
	// now is the time of the sync.
	now metav1.Time
}

// decide turns facts and the observation into one plan.
func decide(f *facts, snap *observe.Snapshot, o decideOptions) plan {
	p := plan{facts: f, snap: snap, systemUser: f.systemUser}
	blocked := f.unresolved
	if blocked == nil {
		p.out, blocked = renderTarget(f, o, &p)
	}
	if f.certificateRead {
		p.certificate = certificateWrite(f.nc, f.certificate)
	}
	p.input = planInput(f, p.out, snap, blocked, o)
	p.reloadVia, p.input.CanReload, p.input.NoReload = reloadAccess(f, p.systemUser, &p.input)
	p.decision = rollout.Plan(p.input)
	return p
}

// renderTarget renders the cluster's objects, or says why they cannot be:
// out nil then. It chooses the system user (into p).
func renderTarget(f *facts, o decideOptions, p *plan) (*render.Output, *rollout.Blocked) {
	in := render.Input{Cluster: f.nc, Trust: f.trust, ControllerNamespace: o.controllerNamespace, TLS: f.tls}
	for _, so := range f.servers {
		r := render.RunningServer{Ordinal: so.ordinal, StatefulSet: so.statefulSet}
		if so.configMap != nil {
			r.Config = []byte(so.configMap.Data[render.ConfigKey])
		}
		if r.Config != nil || r.StatefulSet != nil {
			in.Running = append(in.Running, r)
		}
	}
	if f.systemUser != nil {
		in.SystemUser = f.systemUser.render
	}
	out, err := render.Render(in)
	if err == nil && chooseSystemUser(f, out) {
		p.systemUserSecret = f.freshSystemUser
		p.systemUser = freshSystemUser(f.freshSystemUser)
		in.SystemUser = p.systemUser.render
		out, err = render.Render(in)
	}
	var te *render.TrustError
	switch {
	case errors.As(err, &te):
		return out, &rollout.Blocked{Reason: te.Reason, Message: te.Message}
	case err != nil:
		// A *render.SpecError, or a spec render cannot turn into objects.
		return out, &rollout.Blocked{Reason: clusterv1beta1.ReasonInvalidSpec, Message: err.Error()}
	}
	return out, nil
}

// chooseSystemUser says whether a cluster without auth and without a
// system user Secret gets the fresh system user gather made: a new
// cluster, or one whose objects change anyway (its Secret is created
// before anything else is written); not a cluster an older release made
// that has nothing to change, so an upgrade of the controller restarts and
// rewrites nothing.
func chooseSystemUser(f *facts, out *render.Output) bool {
	if f.nc.Spec.Auth != nil || f.systemUser != nil || f.freshSystemUser == nil || out == nil {
		return false
	}
	return !f.anyServerObjects() || objectsChange(f, out)
}

// anyServerObjects says some server of the cluster has a ConfigMap or a
// StatefulSet.
func (f *facts) anyServerObjects() bool {
	for _, so := range f.servers {
		if so.configMap != nil || so.statefulSet != nil {
			return true
		}
	}
	return len(f.extra) > 0
}

// objectsChange says the target differs from some server's objects (its
// ConfigMap, template or the config its pod was restarted for).
func objectsChange(f *facts, out *render.Output) bool {
	for i, so := range f.servers {
		target := &out.Servers[i]
		if so.statefulSet == nil || so.configMap == nil {
			return true
		}
		if configMapDiffers(so.configMap, target.ConfigMap) ||
			so.statefulSet.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision] != target.Revision ||
			render.TemplateRevisionOf(so.statefulSet) != target.TemplateRevision {
			return true
		}
	}
	return false
}

// observeTarget names every server of the spec, and every server beyond it
// still being removed (it may lead groups until it is evacuated), with its
// pod's address. A server without a pod address is still expected: it
// counts as silent.
func observeTarget(f *facts) observe.Target {
	t := observe.Target{Cluster: f.nc.Namespace + "/" + f.nc.Name, SystemCredentials: f.systemCreds}
	for _, so := range append(slices.Clone(f.servers), f.extra...) {
		addr := observe.ServerAddr{Name: so.name}
		if so.pod != nil {
			addr.Host = so.pod.Status.PodIP
		}
		t.Servers = append(t.Servers, addr)
	}
	return t
}

// planInput turns what the sync gathered, rendered and observed into the
// planner's input. out is nil when blocked is set.
func planInput(f *facts, out *render.Output, snap *observe.Snapshot, blocked *rollout.Blocked, o decideOptions) rollout.Input {
	nc := f.nc
	in := rollout.Input{
		Cluster:     nc.Name,
		Previous:    nc.Status.Rollout,
		Annotations: nc.Annotations,
		Paused:      nc.Spec.Rollout.Paused,
		Now:         o.now,
		Blocked:     blocked,
		Deleting:    nc.DeletionTimestamp != nil,
		DeleteClaims: nc.Spec.JetStream != nil && nc.Spec.JetStream.VolumeClaimTemplate != nil &&
			nc.Spec.JetStream.VolumeClaimTemplate.WhenDeleted == clusterv1beta1.ClaimDelete,
		// Observed even when blocked: a cluster being deleted is released
		// by the streams it holds.
		Observation:   observation(snap),
		ReloadTimeout: o.reloadTimeout,
	}
	if out == nil {
		return in
	}
	in.TargetRevision = out.Revision
	in.Target = rollout.ConfigFacts(out.Servers[0].Facts)
	if nc.Status.Config != nil {
		in.ConvergedRevision = nc.Status.Config.Revision
	}
	for _, so := range f.extra {
		x := rollout.ServerState{Name: so.name, Ordinal: int(so.ordinal), Created: so.statefulSet != nil,
			Stopped: stopped(so.statefulSet), PodExists: so.pod != nil, PodReady: kubeutil.PodReady(so.pod)}
		in.ExtraServers = append(in.ExtraServers, x)
	}
	for i, so := range f.servers {
		target := &out.Servers[i]
		s := rollout.ServerState{
			Name:                   so.name,
			Ordinal:                int(so.ordinal),
			TargetConfigRevision:   target.Revision,
			TargetTemplateRevision: target.TemplateRevision,
			PodExists:              so.pod != nil,
			PodReady:               kubeutil.PodReady(so.pod),
			// For a crash loop, the exit and the last log line rather than
			// the back-off message, which changes on every retry.
			StartProblem: startProblem(so.pod),
		}
		if so.statefulSet == nil {
			s.OldClaimDeleting = claimStillGoing(f, so, target.StatefulSet)
		}
		if sts := so.statefulSet; sts != nil {
			s.Created = true
			s.RestartRevision = sts.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision]
			s.TemplateRevision = render.TemplateRevisionOf(sts)
			if s.TemplateRevision != target.TemplateRevision {
				s.TemplateChanges = render.TemplateChanges(&sts.Spec.Template, &target.StatefulSet.Spec.Template)
			}
			s.CreatedFor = sts.Annotations[clusterv1beta1.AnnotationCreatedFor]
			s.Reload = parseReload(&sts.ObjectMeta)
			s.Stopped = stopped(sts)
			s.EphemeralStore = len(sts.Spec.VolumeClaimTemplates) == 0
			claimChange(f, so, target.StatefulSet, &s)
			var conf []byte
			if so.configMap != nil {
				conf = []byte(so.configMap.Data[render.ConfigKey])
			}
			// An unreadable config gives facts that differ from any target,
			// so the planner never takes the server as up to date.
			running, _ := render.ReadConfig(conf, render.ImageVersion(sts))
			s.ConfigRevision = running.Revision
			s.Running = rollout.ConfigFacts(running.Facts)
		}
		if srv, ok := snap.Server(so.name); ok && srv.Answered {
			s.Answered = true
			s.ReportedRevision = srv.ConfigRevision
		}
		in.Servers = append(in.Servers, s)
	}
	return in
}

// stopped says a server's StatefulSet is scaled to 0.
func stopped(sts *appsv1.StatefulSet) bool {
	return sts != nil && sts.Spec.Replicas != nil && *sts.Spec.Replicas == 0
}

// observation is the part of the snapshot the planner needs.
func observation(snap *observe.Snapshot) rollout.Observation {
	obs := rollout.Observation{
		Observed: snap.Verdict.Reason != clusterv1beta1.ReasonObservationFailed,
		Settled: rollout.Verdict{
			Status: snap.Verdict.Status, Reason: snap.Verdict.Reason, Message: snap.Verdict.Message,
		},
		MetaLeader: snap.MetaLeader,
	}
	if leader, ok := snap.Server(snap.MetaLeader); ok {
		obs.MetaMembers = leader.MetaMembers
	}
	for _, g := range snap.Groups {
		if g.Kind == observe.GroupMeta && g.Leader != "" && g.Leader == snap.MetaLeader {
			for _, m := range g.Members {
				if m.Current && !m.Offline {
					obs.MetaCurrent = append(obs.MetaCurrent, m.Name)
				}
			}
		}
	}
	for _, acc := range snap.Streams {
		for _, s := range acc.Streams {
			obs.Streams = append(obs.Streams, rollout.StreamRef{Account: acc.Account, Name: s.Name})
		}
	}
	obs.Assets = assets(snap)
	return obs
}

// assets are the observed streams and consumers with where their copies are.
func assets(snap *observe.Snapshot) []rollout.Asset {
	var out []rollout.Asset
	for _, g := range snap.Groups {
		if g.Kind != observe.GroupStream && g.Kind != observe.GroupConsumer {
			continue
		}
		a := rollout.Asset{Account: g.Account, Name: g.Name, Leader: g.Leader}
		for _, m := range g.Members {
			a.Members = append(a.Members, m.Name)
			if m.Current && !m.Offline && !m.Pending {
				a.Current = append(a.Current, m.Name)
			}
		}
		out = append(out, a)
	}
	return out
}

// reloadAccess says whether the controller can send reloads to the cluster,
// and if not, why (for status.config.restartReason), with the system target
// to send them through.
func reloadAccess(f *facts, su *systemUser, in *rollout.Input) (observe.Target, bool, string) {
	t := observe.Target{Cluster: f.nc.Namespace + "/" + f.nc.Name}
	if f.tls.Client != nil {
		if f.tls.Client.Verify {
			return t, false, "reloads need a client certificate with spec.tls.verifyClients, which the controller does not have"
		}
		t.TLSRootCAs, t.TLSServerName = f.tlsCA, f.nc.Name+"."+f.nc.Namespace+".svc"
	}
	if f.nc.Spec.Auth != nil {
		if len(f.systemCreds) == 0 {
			return t, false, "reloads need spec.auth.systemCredentials (the creds file of a system account user)"
		}
		full := observeTarget(f)
		full.TLSRootCAs, full.TLSServerName = t.TLSRootCAs, t.TLSServerName
		return full, true, ""
	}
	if su == nil {
		return t, false, "reloads need the controller's system user, which is not rendered yet"
	}
	t.SystemUser, t.SystemPassword = su.user, su.password
	for i, so := range f.servers {
		if i >= len(in.Servers) || !in.Servers[i].Created || !in.Servers[i].Running.SystemUser || !kubeutil.PodReady(so.pod) {
			continue
		}
		t.Servers = append(t.Servers, observe.ServerAddr{Name: so.name, Host: so.pod.Status.PodIP})
	}
	if len(t.Servers) == 0 {
		return t, false, "reloads need the controller's system user on a running server, and no running server has it yet"
	}
	return t, true, ""
}
