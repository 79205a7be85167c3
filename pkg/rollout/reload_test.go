package rollout

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

var (
	tagged   = target(func(f *ConfigFacts) { f.ServerTags = []string{"az:a"} })
	upgraded = target(func(f *ConfigFacts) { f.Version = "2.15.3" })
	// baseFacts has 1Gi/10Gi.
	limitsRaised  = target(func(f *ConfigFacts) { f.MaxMemoryStore, f.MaxFileStore = 2<<30, 20<<30 })
	limitsLowered = target(func(f *ConfigFacts) { f.MaxMemoryStore = 512 << 20 })
	// lameDuckShortened: the servers run the default lame duck settings,
	// the target has a grace period of 1s.
	lameDuckShortened = func(in *Input) {
		for i := range in.Servers {
			in.Servers[i].Running.LameDuckDuration, in.Servers[i].Running.LameDuckGracePeriod = "30s", "10s"
		}
		in.Target.LameDuckDuration, in.Target.LameDuckGracePeriod = "30s", "1s"
	}
	withAuth = func(in *Input) {
		in.Target.Operator, in.Target.SystemAccount, in.Target.Resolver = opA, sysA, "full"
		for i := range in.Servers {
			in.Servers[i].Running.Operator, in.Servers[i].Running.SystemAccount, in.Servers[i].Running.Resolver = opA, sysA, "full"
		}
	}
)

// onMemory puts every server and the target on the memory resolver (on top
// of withAuth); the others run a full one.
func onMemory(in *Input) {
	in.Target.Resolver = MemoryResolver
	for i := range in.Servers {
		in.Servers[i].Running.Resolver = MemoryResolver
	}
}

// accountAdded preloads one more account in the target.
func accountAdded(in *Input) { in.Target.Accounts = append(in.Target.Accounts, "AAPP") }

func canReload(in *Input) { in.CanReload, in.ReloadTimeout = true, 2*time.Minute }

func cannotReload(why string) opt {
	return func(in *Input) { in.CanReload, in.NoReload, in.ReloadTimeout = false, why, 2*time.Minute }
}

// reloadAt records a reload of the server onto newRev; Started and Refused
// leave its ConfigMap at newRev and its pod template on oldRev, Done makes
// it report newRev.
func reloadAt(name string, phase ReloadPhase, since time.Duration, msg string) opt {
	return func(in *Input) {
		s := server(in, name)
		s.Reload = ServerReload{Revision: newRev, Phase: phase, Since: ts(since), Message: msg}
		s.ConfigRevision, s.Running = newRev, in.Target
		if phase == ReloadDone {
			s.ReportedRevision = newRev
		}
	}
}

func TestReload(t *testing.T) {
	tests := []struct {
		name    string
		in      Input
		kind    StepKind // "" for no step
		server  string
		confirm bool
		reason  string
		message string
		why     string // status.rollout.restartReason
	}{
		{
			name: "other server tags on a cluster without auth are reloaded, highest ordinal first",
			in:   cluster(3, tagged, canReload),
			kind: Reload, server: "demo-2", reason: clusterv1beta1.ReasonReloading, message: "reloading demo-2 (1 of 3)",
		},
		{
			name: "without a way to send the reload, other server tags restart the server and the status says which field enables reloads",
			in:   cluster(3, tagged, cannotReload("reloads need spec.auth.systemCredentials")),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "reloads need spec.auth.systemCredentials",
		},
		{
			name: "a change with a reloadable and a restart-only part restarts, naming the restart-only part",
			in:   cluster(3, tagged, upgraded, canReload),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "another nats-server version (2.15.2 -> 2.15.3) cannot be reloaded",
		},
		{
			name: "with auth, other server tags restart: a reload would stop the account resolver",
			in:   cluster(3, withAuth, tagged, canReload),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "other server tags (none -> az:a) cannot be reloaded with a full or cache resolver (a reload stops the server fetching accounts from its peers); with spec.auth.resolver Memory it would reload",
		},
		{
			name: "with auth on the memory resolver, other server tags are reloaded",
			in:   cluster(3, withAuth, onMemory, tagged, canReload),
			kind: Reload, server: "demo-2", reason: clusterv1beta1.ReasonReloading, message: "reloading demo-2 (1 of 3)",
		},
		{
			name: "with auth on the memory resolver, an account added is reloaded",
			in:   cluster(3, withAuth, onMemory, canReload, accountAdded),
			kind: Reload, server: "demo-2", reason: clusterv1beta1.ReasonReloading, message: "reloading demo-2 (1 of 3)",
		},
		{
			name: "with auth, an account added restarts on a full resolver, and the reason says what would reload it",
			in:   cluster(3, withAuth, canReload, accountAdded),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "other preloaded accounts cannot be reloaded with a full or cache resolver (a reload stops the server fetching accounts from its peers); with spec.auth.resolver Memory it would reload",
		},
		{
			name: "with auth, moving to the memory resolver restarts: the old resolver keeps answering lookups after a reload",
			in:   cluster(3, withAuth, canReload, func(in *Input) { in.Target.Resolver = MemoryResolver }),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "another account resolver (full -> mem) cannot be reloaded",
		},
		{
			name: "with auth on the memory resolver, lowered JetStream limits still restart",
			in:   cluster(3, withAuth, onMemory, canReload, func(in *Input) { in.Target.MaxMemoryStore = 1 }),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "lowered JetStream limits, or a limit set or unset cannot be reloaded",
		},
		{
			name: "a server whose ConfigMap is ahead of its pod (a step cut short) is restarted: what it runs is not known",
			in: cluster(3, tagged, canReload, func(in *Input) {
				server(in, "demo-2").ConfigRevision = "written-by-a-step-cut-short"
			}),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "the ConfigMap of demo-2 holds a config its server neither restarted for nor reloaded",
		},
		{
			name: "a server that reports the revision its ConfigMap holds, from a reload not recorded Done yet, is reloaded onto the next change",
			in: cluster(3, tagged, canReload, func(in *Input) {
				s := server(in, "demo-2")
				s.ConfigRevision, s.ReportedRevision = "reloaded-before", "reloaded-before"
				s.Reload = ServerReload{Revision: "reloaded-before", Phase: ReloadStarted}
			}),
			kind: Reload, server: "demo-2", reason: clusterv1beta1.ReasonReloading, message: "reloading demo-2 (1 of 3)",
		},
		{
			name: "raised JetStream limits on a cluster without auth are reloaded",
			in:   cluster(3, limitsRaised, canReload),
			kind: Reload, server: "demo-2", reason: clusterv1beta1.ReasonReloading, message: "reloading demo-2 (1 of 3)",
		},
		{
			name: "lowered JetStream limits restart the server: nats-server refuses to reload them",
			in:   cluster(3, limitsLowered, canReload),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "lowered JetStream limits, or a limit set or unset cannot be reloaded",
		},
		{
			name: "with auth, raised JetStream limits restart: a reload would stop the account resolver",
			in:   cluster(3, withAuth, limitsRaised, canReload),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "raised JetStream limits cannot be reloaded with a full or cache resolver (a reload stops the server fetching accounts from its peers); with spec.auth.resolver Memory it would reload",
		},
		{
			name: "other lame duck settings on a cluster without auth restart the servers one at a time: nats-server reloads neither",
			in:   cluster(3, lameDuckShortened, canReload),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "other lame duck settings (duration 30s, grace period 10s -> duration 30s, grace period 1s) cannot be reloaded",
		},
		{
			name: "once the first server runs the other lame duck settings, the next is restarted, the meta leader last",
			in:   cluster(3, lameDuckShortened, canReload, stepped("demo-2")),
			kind: RestartOne, server: "demo-1", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-1 (2 of 3)",
			why: "other lame duck settings (duration 30s, grace period 10s -> duration 30s, grace period 1s) cannot be reloaded",
		},
		{
			name: "other lame duck settings with other server tags restart, naming only the lame duck settings",
			in:   cluster(3, lameDuckShortened, tagged, canReload),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "other lame duck settings (duration 30s, grace period 10s -> duration 30s, grace period 1s) cannot be reloaded",
		},
		{
			name: "a reload in flight is asked again, even through a closed gate, until the server reports the revision",
			in:   cluster(3, tagged, canReload, reloadAt("demo-2", ReloadStarted, 0, ""), at(30*time.Second), unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "catching up")),
			kind: Reload, server: "demo-2", reason: clusterv1beta1.ReasonReloading,
			message: "reloading demo-2 (1 of 3); waiting for it to report revision new",
		},
		{
			name: "a reload in flight whose server reports the revision is recorded done",
			in:   cluster(3, tagged, canReload, reloadAt("demo-2", ReloadStarted, 0, ""), reports("demo-2", newRev), at(5*time.Second)),
			kind: Reload, server: "demo-2", confirm: true, reason: clusterv1beta1.ReasonReloading, message: "reloading demo-2 (1 of 3)",
		},
		{
			name: "a reload not confirmed within the timeout becomes a restart of that server, with the reason",
			in:   cluster(3, tagged, canReload, reloadAt("demo-2", ReloadStarted, 0, ""), at(2*time.Minute)),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "demo-2 did not report revision new within 2m0s of its reload",
		},
		{
			name: "a reload nats-server refused becomes a restart of that server, with nats-server's words",
			in: cluster(3, tagged, canReload,
				reloadAt("demo-2", ReloadRefused, 0, "config reload not supported for decreasing jetstream max memory and store")),
			kind: RestartOne, server: "demo-2", reason: clusterv1beta1.ReasonRollingRestart, message: "restarting demo-2 (1 of 3)",
			why: "nats-server refused to reload demo-2: config reload not supported for decreasing jetstream max memory and store",
		},
		{
			name: "a reloaded server counts as on the target: the next one is reloaded once the gate opens",
			in:   cluster(3, tagged, canReload, reloadAt("demo-2", ReloadDone, 0, "")),
			kind: Reload, server: "demo-1", reason: clusterv1beta1.ReasonReloading, message: "reloading demo-1 (2 of 3)",
		},
		{
			name:   "before the next reload, a closed gate is waited for as Reloading",
			in:     cluster(3, tagged, canReload, reloadAt("demo-2", ReloadDone, 0, ""), unsettled(clusterv1beta1.ReasonGroupsCatchingUp, "catching up")),
			reason: clusterv1beta1.ReasonReloading, message: "before reloading demo-1 (2 of 3); waiting for Settled",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tableCase(t, tt.in)
			switch {
			case tt.kind == "" && d.Step != nil:
				t.Fatalf("Step = %+v, want none", d.Step)
			case tt.kind != "" && d.Step == nil:
				t.Fatalf("no step, want %s of %s; Progressing %s %q", tt.kind, tt.server, d.Progressing.Reason, d.Progressing.Message)
			case tt.kind == Reload:
				if d.Step.Kind != Reload || d.Step.Reload == nil || d.Step.Reload.Server != tt.server || d.Step.Reload.Revision != newRev || d.Step.Reload.Confirmed != tt.confirm {
					t.Errorf("Step = %+v (reload %+v), want a Reload of %s to %s, confirmed %t", d.Step, d.Step.Reload, tt.server, newRev, tt.confirm)
				}
			case tt.kind == RestartOne:
				if d.Step.Kind != RestartOne || len(d.Step.Servers) != 1 || d.Step.Servers[0] != tt.server {
					t.Errorf("Step = %+v, want a restart of %s", d.Step, tt.server)
				}
			}
			if d.Progressing.Status != metav1.ConditionTrue || d.Progressing.Reason != tt.reason || d.Progressing.Message != tt.message {
				t.Errorf("Progressing = %s %s %q, want True %s %q", d.Progressing.Status, d.Progressing.Reason, d.Progressing.Message, tt.reason, tt.message)
			}
			if d.Rollout == nil || d.Rollout.RestartReason != tt.why {
				t.Errorf("status.rollout = %s, want restartReason %q", toJSON(d.Rollout), tt.why)
			}
		})
	}
}

// Once every server reloaded and reports the target, the cluster is up to
// date with appliedBy Reload; a rollout that restarted says Restart with the
// reason it carried in status.rollout.
func TestAppliedBy(t *testing.T) {
	reloadedAll := cluster(3, tagged, canReload, reloadAt("demo-2", ReloadDone, 0, ""), reloadAt("demo-1", ReloadDone, 0, ""), reloadAt("demo-0", ReloadDone, 0, ""),
		previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-0", Updated: []string{"demo-2", "demo-1"}}))
	d := Plan(reloadedAll)
	if d.Progressing.Reason != clusterv1beta1.ReasonUpToDate || d.AppliedBy != clusterv1beta1.AppliedByReload || d.RestartReason != "" {
		t.Errorf("every server reloaded: %s %q, appliedBy %q, restartReason %q; want UpToDate, Reload, none", d.Progressing.Reason, d.Progressing.Message, d.AppliedBy, d.RestartReason)
	}

	restarted := cluster(3, upgraded, stepped("demo-2", "demo-1", "demo-0"),
		previous(&clusterv1beta1.RolloutStatus{TargetRevision: newRev, Current: "demo-0", Updated: []string{"demo-2", "demo-1"},
			RestartReason: "another nats-server version (2.15.2 -> 2.15.3) cannot be reloaded"}))
	d = Plan(restarted)
	if d.Progressing.Reason != clusterv1beta1.ReasonUpToDate || d.AppliedBy != clusterv1beta1.AppliedByRestart || d.RestartReason != "another nats-server version (2.15.2 -> 2.15.3) cannot be reloaded" {
		t.Errorf("every server restarted: %s %q, appliedBy %q, restartReason %q; want UpToDate, Restart, the carried reason", d.Progressing.Reason, d.Progressing.Message, d.AppliedBy, d.RestartReason)
	}
}

// TestReloadStagesTheServersThatReloadNext: a Reload step names the other
// servers whose own steps would be reloads and whose target is not staged
// yet, so their ConfigMaps are written at once and each reloads at its turn
// without waiting for the kubelet to update its file.
func TestReloadStagesTheServersThatReloadNext(t *testing.T) {
	staged := func(names ...string) opt {
		return func(in *Input) {
			for _, n := range names {
				server(in, n).StagedRevision = newRev
			}
		}
	}
	tests := []struct {
		name   string
		in     Input
		server string
		stage  []string
	}{
		{
			name:   "the first reload stages every other server, in the order they step",
			in:     cluster(3, tagged, canReload),
			server: "demo-2", stage: []string{"demo-1", "demo-0"},
		},
		{
			name:   "a server staged already is not staged again",
			in:     cluster(3, tagged, canReload, staged("demo-1")),
			server: "demo-2", stage: []string{"demo-0"},
		},
		{
			name:   "a reload in flight with the others staged stages nothing",
			in:     cluster(3, tagged, canReload, staged("demo-1", "demo-0"), reloadAt("demo-2", ReloadStarted, time.Second, "")),
			server: "demo-2",
		},
		{
			name: "a reload in flight stages a server whose staged config is of an earlier target",
			in: cluster(3, tagged, canReload, reloadAt("demo-2", ReloadStarted, time.Second, ""), staged("demo-0"), func(in *Input) {
				server(in, "demo-1").StagedRevision = "an-earlier-target"
			}),
			server: "demo-2", stage: []string{"demo-1"},
		},
		{
			name: "a server whose own step is a restart (its pod template changes) is not staged",
			in: cluster(3, tagged, canReload, func(in *Input) {
				server(in, "demo-0").TemplateRevision = "an-older-template"
			}),
			server: "demo-2", stage: []string{"demo-1"},
		},
		{
			name: "a server whose ConfigMap is ahead of what it runs is not staged: it restarts",
			in: cluster(3, tagged, canReload, func(in *Input) {
				server(in, "demo-1").ConfigRevision = "written-by-a-step-cut-short"
			}),
			server: "demo-2", stage: []string{"demo-0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Plan(tt.in)
			if d.Step == nil || d.Step.Kind != Reload || d.Step.Reload == nil || d.Step.Reload.Server != tt.server {
				t.Fatalf("Step = %+v, want a Reload of %s; Progressing %q", d.Step, tt.server, d.Progressing.Message)
			}
			if got := d.Step.Reload.Stage; !slices.Equal(got, tt.stage) {
				t.Errorf("Stage = %q, want %q", got, tt.stage)
			}
		})
	}
	// Restarts stage nothing: a version change is no reload.
	if d := Plan(cluster(3, upgraded, canReload)); d.Step == nil || d.Step.Kind != RestartOne || d.Step.Reload != nil {
		t.Errorf("a version change: Step = %+v, want a restart with no reload payload", d.Step)
	}
}
