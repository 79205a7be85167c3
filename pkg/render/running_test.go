package render_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// runningOf gives the objects of out as a server's existing objects.
func runningOf(out *render.Output) []render.RunningServer {
	var r []render.RunningServer
	for _, s := range out.Servers {
		r = append(r, render.RunningServer{Ordinal: s.Ordinal, Config: s.Config, ConfigMap: s.ConfigMap, StatefulSet: s.StatefulSet})
	}
	return r
}

func mustRender(t *testing.T, in render.Input) *render.Output {
	t.Helper()
	out, err := render.Render(in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The fresh system user is rendered for a new cluster and for one whose
// objects change anyway, never for a cluster an older release made that
// has nothing to change (an upgrade of the controller rewrites nothing).
func TestRenderChoosesTheFreshSystemUser(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.JetStream())
	old := mustRender(t, render.Input{Cluster: nc}) // what an older release wrote: no system user
	tests := []struct {
		name    string
		nc      *clusterv1beta1.NatsCluster
		in      render.Input
		want    bool
		wantCfg func(*render.Output) bool
	}{
		{name: "a new cluster gets it", nc: nc, in: render.Input{}, want: true},
		{name: "an older release's cluster with nothing to change does not", nc: nc, in: render.Input{Running: runningOf(old)}, want: false},
		{name: "an older release's cluster whose version changes does", nc: rt.NewCluster("ns", "demo", rt.JetStream(), rt.Version("2.15.1")), in: render.Input{Running: runningOf(old)}, want: true},
		{name: "a server whose ConfigMap labels differ counts as a change", nc: nc, in: render.Input{Running: func() []render.RunningServer {
			r := runningOf(old)
			cm := r[1].ConfigMap.DeepCopy()
			cm.Labels["extra"] = "x"
			r[1].ConfigMap = cm
			return r
		}()}, want: true},
		{name: "a server without its StatefulSet counts as a change", nc: nc, in: render.Input{Running: runningOf(old)[:2]}, want: true},
		{name: "a cluster with a system user keeps it", nc: nc, in: render.Input{SystemUser: rt.RotatedSystemUser()}, want: false},
		{name: "a cluster with spec.auth never gets it", nc: rt.NewCluster("ns", "demo", rt.JetStream(), rt.Auth("trust")), in: render.Input{Trust: fixedTrust(t)}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Cluster, in.FreshSystemUser = tt.nc, rt.SystemUser()
			out := mustRender(t, in)
			if out.FreshSystemUser != tt.want {
				t.Errorf("FreshSystemUser = %v; want %v", out.FreshSystemUser, tt.want)
			}
			// What is rendered is what the flag says: the same objects as a
			// render given that user (or none) as its SystemUser.
			plain := in
			plain.FreshSystemUser = nil
			if tt.want {
				plain.SystemUser = rt.SystemUser()
			}
			if diff := cmp.Diff(string(mustRender(t, plain).Servers[0].Config), string(out.Servers[0].Config)); diff != "" {
				t.Errorf("config differs from the render the choice names (-want +got):\n%s", diff)
			}
		})
	}
}

// Render reads back what each server runs: the config revision and facts
// of its ConfigMap, the config its pods were restarted for, its template
// revision and what of its template differs from the target.
func TestRenderReadsBackWhatRuns(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.JetStream())
	old := mustRender(t, render.Input{Cluster: nc})
	running := runningOf(old)
	running[2].Config, running[2].ConfigMap = nil, nil // demo-2 lost its ConfigMap

	target := rt.NewCluster("ns", "demo", rt.JetStream(), rt.MemoryLimit("3Gi"))
	out := mustRender(t, render.Input{Cluster: target, Running: running[:3]})
	for i, s := range out.Servers {
		r := s.Running
		if r == nil {
			t.Fatalf("%s: Running nil; want what its StatefulSet runs", s.Name)
		}
		if r.RestartRevision != old.Servers[i].Revision || r.TemplateRevision != old.Servers[i].TemplateRevision {
			t.Errorf("%s: restart %q template %q; want %q %q", s.Name, r.RestartRevision, r.TemplateRevision, old.Servers[i].Revision, old.Servers[i].TemplateRevision)
		}
		if r.TemplateRevision == s.TemplateRevision || !slices.Contains(r.TemplateChanges, "the nats container") {
			t.Errorf("%s: template changes %q (revision %s -> %s); want resources named", s.Name, r.TemplateChanges, r.TemplateRevision, s.TemplateRevision)
		}
		if i < 2 {
			if r.ConfigRevision != old.Servers[i].Revision || !cmp.Equal(r.Facts, old.Servers[i].Facts) {
				t.Errorf("%s: config revision %q facts %+v; want %q %+v", s.Name, r.ConfigRevision, r.Facts, old.Servers[i].Revision, old.Servers[i].Facts)
			}
			continue
		}
		// No config: facts that match no target, so it is never up to date.
		if r.ConfigRevision != "" || cmp.Equal(r.Facts, s.Facts) || r.Facts.Version != rt.DefaultVersion {
			t.Errorf("%s without a ConfigMap: revision %q facts %+v; want none, only the image version", s.Name, r.ConfigRevision, r.Facts)
		}
	}
	same := mustRender(t, render.Input{Cluster: nc, Running: runningOf(old)})
	if r := same.Servers[0].Running; r.TemplateChanges != nil || r.TemplateRevision != same.Servers[0].TemplateRevision {
		t.Errorf("unchanged: template changes %q; want none", r.TemplateChanges)
	}
	if fresh := mustRender(t, render.Input{Cluster: nc}); fresh.Servers[0].Running != nil {
		t.Errorf("a server without objects: Running %+v; want nil", fresh.Servers[0].Running)
	}
}

// Without spec.routes.tls the servers keep the route TLS they run; a new
// cluster gets generated route TLS.
func TestRouteTLSModeKeepsWhatRuns(t *testing.T) {
	nc := rt.NewCluster("ns", "demo")
	plain := runningOf(mustRender(t, render.Input{Cluster: nc}))
	withTLS := runningOf(mustRender(t, render.Input{Cluster: nc, TLS: render.TLS{Routes: &render.TLSFiles{
		Secret: "demo-routes", CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt", Digest: "d", Verify: true}}}))
	asked := rt.NewCluster("ns", "demo")
	asked.Spec.Routes.TLS = &clusterv1beta1.RouteTLS{Mode: clusterv1beta1.RouteTLSDisabled}
	empty := rt.NewCluster("ns", "demo")
	empty.Spec.Routes.TLS = &clusterv1beta1.RouteTLS{}
	tests := []struct {
		name    string
		nc      *clusterv1beta1.NatsCluster
		running []render.RunningServer
		want    clusterv1beta1.RouteTLSMode
	}{
		{"a new cluster gets generated route TLS", nc, nil, clusterv1beta1.RouteTLSGenerated},
		{"servers with only ConfigMaps are still a new cluster", nc, []render.RunningServer{{Ordinal: 0, Config: plain[0].Config}}, clusterv1beta1.RouteTLSGenerated},
		{"servers on plain routes (an earlier release) keep them", nc, plain, clusterv1beta1.RouteTLSDisabled},
		{"servers on route TLS keep it", nc, withTLS, clusterv1beta1.RouteTLSGenerated},
		{"one server on route TLS is enough: a half-made change is finished, never undone", nc, append(slices.Clone(plain[:2]), withTLS[2]), clusterv1beta1.RouteTLSGenerated},
		{"spec.routes.tls wins over what runs", asked, withTLS, clusterv1beta1.RouteTLSDisabled},
		{"spec.routes.tls without a mode is generated", empty, plain, clusterv1beta1.RouteTLSGenerated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render.RouteTLSMode(tt.nc, tt.running); got != tt.want {
				t.Errorf("RouteTLSMode = %q; want %q", got, tt.want)
			}
		})
	}
}
