package render_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// spec.lameDuck reaches every server's nats.conf (each unset field its
// default), nats-server reads it back as given, and the pods' termination
// grace period is the duration plus the grace period plus 20s.
func TestLameDuckIsRenderedWithTheTerminationGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name                string
		opts                []rt.ClusterOption
		duration, grace     string // as nats.conf holds them
		wantDur, wantGrace  time.Duration
		terminationGraceSec int64
	}{
		{name: "unset: 30s and 10s, 60s to terminate", duration: "30s", grace: "10s",
			wantDur: 30 * time.Second, wantGrace: 10 * time.Second, terminationGraceSec: 60},
		{name: "empty: the same as unset", opts: []rt.ClusterOption{rt.LameDuck("", "")}, duration: "30s", grace: "10s",
			wantDur: 30 * time.Second, wantGrace: 10 * time.Second, terminationGraceSec: 60},
		{name: "the tests' short grace period", opts: []rt.ClusterOption{rt.LameDuck("30s", "1s")}, duration: "30s", grace: "1s",
			wantDur: 30 * time.Second, wantGrace: time.Second, terminationGraceSec: 51},
		{name: "a longer duration keeps the default grace period", opts: []rt.ClusterOption{rt.LameDuck("2m", "")}, duration: "2m0s", grace: "10s",
			wantDur: 2 * time.Minute, wantGrace: 10 * time.Second, terminationGraceSec: 150},
		{name: "a grace period of a fraction of a second rounds the termination grace period up", opts: []rt.ClusterOption{rt.LameDuck("", "1500ms")},
			duration: "30s", grace: "1.5s", wantDur: 30 * time.Second, wantGrace: 1500 * time.Millisecond, terminationGraceSec: 52},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := rt.NewCluster("ns", "demo", append([]rt.ClusterOption{rt.JetStream()}, tc.opts...)...)
			if got := render.TerminationGracePeriodOf(&nc.Spec); got != tc.terminationGraceSec {
				t.Errorf("TerminationGracePeriodOf = %d, want %d", got, tc.terminationGraceSec)
			}
			out, err := render.Render(render.Input{Cluster: nc})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range out.Servers {
				var c struct {
					Duration string `json:"lame_duck_duration"`
					Grace    string `json:"lame_duck_grace_period"`
				}
				if err := json.Unmarshal(s.Config, &c); err != nil {
					t.Fatal(err)
				}
				if c.Duration != tc.duration || c.Grace != tc.grace {
					t.Errorf("%s: nats.conf has lame_duck_duration %q and lame_duck_grace_period %q, want %q and %q", s.Name, c.Duration, c.Grace, tc.duration, tc.grace)
				}
				if s.Facts.LameDuckDuration != tc.duration || s.Facts.LameDuckGracePeriod != tc.grace {
					t.Errorf("%s: facts say %q and %q, want %q and %q", s.Name, s.Facts.LameDuckDuration, s.Facts.LameDuckGracePeriod, tc.duration, tc.grace)
				}
				o := loadRendered(t, s.Config)
				if o.LameDuckDuration != tc.wantDur || o.LameDuckGracePeriod != tc.wantGrace {
					t.Errorf("%s: nats-server reads %s and %s, want %s and %s", s.Name, o.LameDuckDuration, o.LameDuckGracePeriod, tc.wantDur, tc.wantGrace)
				}
				pod := s.StatefulSet.Spec.Template.Spec
				if g := pod.TerminationGracePeriodSeconds; g == nil || *g != tc.terminationGraceSec {
					t.Errorf("%s: terminationGracePeriodSeconds %v, want %d", s.Name, g, tc.terminationGraceSec)
				}
			}
		})
	}
}

// Writing the defaults out changes nothing (no restart for a spec that
// spells them), and another grace period is a new revision with other
// facts and another pod template.
func TestLameDuckDefaultsKeepTheRevisionAndAChangeMakesANewOne(t *testing.T) {
	render1 := func(opts ...rt.ClusterOption) *render.Output {
		t.Helper()
		out, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo", append([]rt.ClusterOption{rt.JetStream()}, opts...)...)})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	unset, explicit, short := render1(), render1(rt.LameDuck("30s", "10s")), render1(rt.LameDuck("30s", "1s"))
	if unset.Revision != explicit.Revision || unset.Servers[0].TemplateRevision != explicit.Servers[0].TemplateRevision {
		t.Errorf("spec.lameDuck {30s, 10s} renders revision %s (template %s), unset %s (template %s): want the same",
			explicit.Revision, explicit.Servers[0].TemplateRevision, unset.Revision, unset.Servers[0].TemplateRevision)
	}
	if short.Revision == unset.Revision {
		t.Errorf("a grace period of 1s renders the same revision %s as the default", short.Revision)
	}
	if short.Servers[0].TemplateRevision == unset.Servers[0].TemplateRevision {
		t.Errorf("a grace period of 1s renders the same pod template revision (its termination grace period differs)")
	}
	if f := short.Servers[0].Facts; f.LameDuckGracePeriod != "1s" || f.LameDuckDuration != "30s" {
		t.Errorf("facts of a grace period of 1s: %+v", f)
	}
}
