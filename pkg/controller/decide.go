package controller

// decide: a pure function of the gathered facts and the observation. It
// renders the target (one render.Render call, which also reads back what
// the servers run), turns facts, target and observation
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
	// systemUserSecret is the system user Secret to create or, with a
	// resourceVersion, to update with its nkey seed added (the fresh one
	// gather made, when render chose it); nil when none is.
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
	// podTemplatePolicy: what a cluster may ask of its pods; render
	// refuses the rest (InvalidSpec).
	podTemplatePolicy render.PodTemplatePolicy
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
	p.certificate = f.certificateWrite
	p.input = planInput(f, p.out, snap, blocked, o)
	p.reloadVia, p.input.CanReload, p.input.NoReload = reloadAccess(f, p.systemUser, &p.input)
	p.decision = rollout.Plan(p.input)
	return p
}

// renderTarget renders the cluster's objects in one render.Render call,
// or says why they cannot be: out nil then. Render chooses whether the
// fresh system user gather made is used (render.Input.FreshSystemUser);
// when it is, its Secret goes into p, to be created first.
func renderTarget(f *facts, o decideOptions, p *plan) (*render.Output, *rollout.Blocked) {
	in := render.Input{Cluster: f.nc, Trust: f.trust, ControllerNamespace: o.controllerNamespace, TLS: f.tls, Running: f.running(), Now: o.now.Time,
		PodTemplatePolicy: o.podTemplatePolicy}
	if f.systemUser != nil {
		in.SystemUser = f.systemUser.render
		p.systemUserSecret = f.upgradedSystemUser
	}
	var fresh *systemUser
	if f.freshSystemUser != nil {
		fresh = freshSystemUser(f.freshSystemUser)
		in.FreshSystemUser = fresh.render
	}
	out, err := render.Render(in)
	if err == nil && out.FreshSystemUser {
		p.systemUserSecret, p.systemUser = f.freshSystemUser, fresh
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

// running are the existing objects of every server with any, those beyond
// the spec (still being removed) included, as render reads them.
func (f *facts) running() []render.RunningServer {
	var out []render.RunningServer
	for _, so := range slices.Concat(f.servers, f.extra) {
		r := render.RunningServer{Ordinal: so.ordinal, StatefulSet: so.statefulSet, ConfigMap: so.configMap}
		if so.configMap != nil {
			r.Config = []byte(so.configMap.Data[render.ConfigKey])
			if from, ok := so.configMap.Annotations[clusterv1beta1.AnnotationStagedFrom]; ok {
				// Staged ahead of its reload: the server runs the config
				// the annotation keeps, not the one its file holds.
				r.Config = []byte(from)
			}
		}
		if r.Config != nil || r.StatefulSet != nil {
			out = append(out, r)
		}
	}
	return out
}

// observeTarget names every server of the spec, and every server beyond it
// still being removed (it may lead groups until it is evacuated), with its
// pod's address. A server without a pod address is still expected: it
// counts as silent.
//
// Each server's monitoring port is asked over HTTPS when its pod's probes
// are (spec.monitoring.tls when the pod was made: the port's scheme is not
// reloaded, so a pod keeps it for life, and while a change of the setting
// rolls servers of both kinds run), verified against the client CA for the
// client Service's name.
func observeTarget(f *facts) observe.Target {
	t := observe.Target{Cluster: f.nc.Namespace + "/" + f.nc.Name, SystemCredentials: f.systemCreds}
	clientTLS(f, &t)
	for _, so := range append(slices.Clone(f.servers), f.extra...) {
		addr := observe.ServerAddr{Name: so.name, MonitorHTTPS: render.MonitorTLS(&f.nc.Spec)}
		if so.pod != nil {
			addr.Host, addr.PodUID = so.pod.Status.PodIP, string(so.pod.UID)
			if https, ok := podMonitorHTTPS(so.pod); ok {
				addr.MonitorHTTPS = https
			}
		}
		t.Servers = append(t.Servers, addr)
	}
	return t
}

// podMonitorHTTPS says whether a pod's server serves its monitoring port
// over HTTPS, as its nats container's readiness probe (or another HTTP
// probe of the monitoring port) asks it; ok is false when no probe says.
func podMonitorHTTPS(pod *corev1.Pod) (https, ok bool) {
	for _, c := range pod.Spec.Containers {
		if c.Name != render.ContainerName {
			continue
		}
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.StartupProbe, c.LivenessProbe} {
			if p != nil && p.HTTPGet != nil && p.HTTPGet.Port.IntValue() == int(render.MonitorPort) {
				return p.HTTPGet.Scheme == corev1.URISchemeHTTPS, true
			}
		}
	}
	return false, false
}

// clientTLS sets the target's TLS for the servers' client port and, with
// spec.monitoring.tls, their monitoring port: the client CA, the client
// Service's name the certificate is for, and the controller's client
// certificate under spec.tls.verifyClients. Nothing without spec.tls.
func clientTLS(f *facts, t *observe.Target) {
	if f.tls.Client == nil {
		return
	}
	t.TLSRootCAs, t.TLSServerName = f.tlsCA, f.nc.Name+"."+f.nc.Namespace+".svc"
	if f.clientCert != nil {
		t.TLSClientCert, t.TLSClientKey = f.clientCert.Cert, f.clientCert.Key
	}
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
		// Accepted in so many words: writes of a group without a majority
		// stop while its server restarts.
		AcceptQuorumLoss: nc.Spec.Rollout.AcceptQuorumLoss,
		Now:              o.now,
		Blocked:          blocked,
		Deleting:         nc.DeletionTimestamp != nil,
		DeleteClaims: nc.Spec.JetStream != nil && nc.Spec.JetStream.VolumeClaimTemplate != nil &&
			nc.Spec.JetStream.VolumeClaimTemplate.WhenDeleted == clusterv1beta1.ClaimDelete,
		// Observed even when blocked: a cluster being deleted is released
		// by the streams it holds.
		Observation:      observation(snap),
		ReloadTimeout:    o.reloadTimeout,
		JetStreamRemotes: f.jetStreamRemotes,
	}
	// A server with objects that did not answer holds what is unknown,
	// never nothing (deletion, reset-jetstream, data loss).
	for _, so := range append(slices.Clone(f.servers), f.extra...) {
		if srv, ok := snap.Server(so.name); so.statefulSet != nil && (!ok || !srv.Answered) {
			in.Observation.Silent = append(in.Observation.Silent, so.name)
		}
	}
	if out == nil {
		return in
	}
	in.TargetRevision = out.Revision
	in.Target = rollout.ConfigFacts(out.Servers[0].Facts)
	in.Migration = migrationInput(f, out.Revision)
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
			// What it runs, as render read it back (target.Running).
			run := target.Running
			if run == nil {
				// Not read back (it cannot be: render reads every server
				// with a StatefulSet): taken as running nothing known,
				// never as up to date.
				run = &render.Running{}
			}
			s.Created = true
			s.RestartRevision = run.RestartRevision
			s.TemplateRevision = run.TemplateRevision
			s.TemplateChanges = run.TemplateChanges
			s.CreatedFor = sts.Annotations[clusterv1beta1.AnnotationCreatedFor]
			s.Reload = parseReload(&sts.ObjectMeta)
			s.Stopped = stopped(sts)
			s.EphemeralStore = len(sts.Spec.VolumeClaimTemplates) == 0
			claimChange(f, so, target.StatefulSet, &s)
			s.ConfigRevision = run.ConfigRevision
			s.Running = rollout.ConfigFacts(run.Facts)
			s.StagedRevision = stagedRevision(so.configMap)
			s.PodBehindTemplate = !so.podGoing && podBehindTemplate(sts, so.pod)
		}
		if srv, ok := snap.Server(so.name); ok && srv.Answered {
			s.Answered = true
			s.ReportedRevision = srv.ConfigRevision
		}
		in.Servers = append(in.Servers, s)
	}
	return in
}

// podBehindTemplate says a running pod was started from an older template
// than its StatefulSet's: its config and template revision annotations
// (copied from the template it was made from) differ from the
// StatefulSet's. Under OnDelete only a step replaces it. A pod going (being
// deleted, or deleted by this controller: serverObjects.podGoing) is not.
func podBehindTemplate(sts *appsv1.StatefulSet, pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, key := range []string{clusterv1beta1.AnnotationConfigRevision, clusterv1beta1.AnnotationTemplateRevision} {
		if pod.Annotations[key] != sts.Spec.Template.Annotations[key] {
			return true
		}
	}
	return false
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
	leader, local := snap.Server(snap.MetaLeader)
	if local {
		obs.MetaMembers = leader.MetaMembers
	}
	for _, g := range snap.Groups {
		if g.Kind == observe.GroupMeta && g.Leader != "" && g.Leader == snap.MetaLeader {
			if !local {
				// A leader in another cluster of the supercluster: its
				// view, asked over $SYS, lists the members.
				for _, m := range g.Members {
					obs.MetaMembers = append(obs.MetaMembers, m.Name)
				}
				slices.Sort(obs.MetaMembers)
			}
			for _, m := range g.Members {
				if m.Current && !m.Offline {
					obs.MetaCurrent = append(obs.MetaCurrent, m.Name)
				}
			}
		}
	}
	for _, acc := range snap.Streams {
		for _, s := range acc.Streams {
			ref := rollout.StreamRef{Account: acc.Account, Name: s.Name}
			obs.Streams = append(obs.Streams, ref)
			obs.LastSeqs = append(obs.LastSeqs, rollout.StreamSeq{Stream: ref, LastSeq: s.LastSeq})
		}
	}
	obs.Assets = assets(snap)
	for _, srv := range snap.Servers {
		for _, g := range srv.Gateways {
			if !slices.Contains(obs.Gateways, g) {
				obs.Gateways = append(obs.Gateways, g)
			}
		}
	}
	slices.Sort(obs.Gateways)
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
		if f.tls.Client.Verify && f.clientCert == nil {
			return t, false, "reloads need a client certificate with spec.tls.verifyClients, which the controller does not have yet"
		}
		clientTLS(f, &t)
	}
	if f.nc.Spec.Auth != nil {
		if len(f.systemCreds) == 0 {
			return t, false, "reloads need spec.auth.systemCredentials (the creds file of a system account user) or the NatsOperatorTrust's spec.systemAccountSigningKey (the controller then mints its own system user)"
		}
		full := observeTarget(f)
		full.TLSRootCAs, full.TLSServerName, full.TLSClientCert, full.TLSClientKey = t.TLSRootCAs, t.TLSServerName, t.TLSClientCert, t.TLSClientKey
		return full, true, ""
	}
	if su == nil {
		return t, false, "reloads need the controller's system user, which is not rendered yet"
	}
	// The nkey user once any server runs it (nothing secret on the wire),
	// through the servers that run it; until then the password user of
	// the Secret, through the servers that run that one.
	nkey := len(su.seed) > 0 && slices.ContainsFunc(in.Servers, func(s rollout.ServerState) bool {
		return s.Created && s.Running.SystemUser && s.Running.SystemUserNKey
	})
	if nkey {
		t.SystemNKeySeed = su.seed
	} else {
		t.SystemUser, t.SystemPassword = su.user, su.password
	}
	for i, so := range f.servers {
		if i >= len(in.Servers) || !in.Servers[i].Created || !in.Servers[i].Running.SystemUser || in.Servers[i].Running.SystemUserNKey != nkey || !kubeutil.PodReady(so.pod) {
			continue
		}
		t.Servers = append(t.Servers, observe.ServerAddr{Name: so.name, Host: so.pod.Status.PodIP, PodUID: string(so.pod.UID)})
	}
	if len(t.Servers) == 0 {
		return t, false, "reloads need the controller's system user on a running server, and no running server has it yet"
	}
	return t, true, ""
}
