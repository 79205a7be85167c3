package render_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// The facts the planner classifies are read back from the configs render
// writes exactly as render computed them for the target, so a running
// server's ConfigMap and the target describe themselves the same way.
func TestReadConfigGivesTheFactsRenderComputed(t *testing.T) {
	trust := fixedTrust(t)
	tests := []struct {
		name  string
		nc    *clusterv1beta1.NatsCluster
		trust *render.Trust
		want  render.Facts
	}{
		{
			name: "a cluster without auth or JetStream has only its version, name and the default lame duck settings",
			nc:   rt.NewCluster("ns", "demo"),
			want: render.Facts{Version: rt.DefaultVersion, ClusterName: "demo", LameDuckDuration: "30s", LameDuckGracePeriod: "10s"},
		},
		{
			name: "JetStream with a domain, limits and tags gives each of them",
			nc: rt.NewCluster("ns", "demo", rt.JetStream(), rt.Domain("hub"), rt.JetStreamLimits("1Gi", "10Gi"),
				rt.ServerTag("zone", "b"), rt.ServerTag("az", "1")),
			want: render.Facts{Version: rt.DefaultVersion, ClusterName: "demo", JetStream: true, JetStreamDomain: "hub",
				MaxMemoryStore: 1 << 30, MaxFileStore: 10 << 30, ServerTags: []string{"az:1", "zone:b"}, LameDuckDuration: "30s", LameDuckGracePeriod: "10s"},
		},
		{
			name: "spec.lameDuck gives its duration and grace period as the config holds them",
			nc:   rt.NewCluster("ns", "demo", rt.LameDuck("90s", "1.5s")),
			want: render.Facts{Version: rt.DefaultVersion, ClusterName: "demo", LameDuckDuration: "1m30s", LameDuckGracePeriod: "1.5s"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render.Render(render.Input{Cluster: tt.nc, Trust: tt.trust})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range out.Servers {
				if diff := cmp.Diff(tt.want, s.Facts); diff != "" {
					t.Errorf("%s: rendered facts (-want +got):\n%s", s.Name, diff)
				}
				got, err := render.ReadConfig(s.Config, tt.nc.Spec.Version)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(s.Facts, got.Facts); diff != "" {
					t.Errorf("%s: facts read back (-rendered +read):\n%s", s.Name, diff)
				}
				if got.Revision != s.Revision {
					t.Errorf("%s: read revision %q, rendered %q", s.Name, got.Revision, s.Revision)
				}
			}
		})
	}
	t.Run("operator mode gives the operator key, the system account and the resolver", func(t *testing.T) {
		nc := rt.NewCluster("ns", "demo", rt.JetStream(), rt.Auth("trust"))
		out, err := render.Render(render.Input{Cluster: nc, Trust: trust})
		if err != nil {
			t.Fatal(err)
		}
		f := out.Servers[0].Facts
		if f.Operator != out.Auth.Operator || f.SystemAccount != out.Auth.SystemAccount || f.Resolver != "full" {
			t.Errorf("facts %+v, auth %s", f, out.Auth)
		}
		got, err := render.ReadConfig(out.Servers[0].Config, nc.Spec.Version)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(f, got.Facts); diff != "" {
			t.Errorf("facts read back (-rendered +read):\n%s", diff)
		}
	})
	t.Run("a config that is not one render wrote is an error", func(t *testing.T) {
		if _, err := render.ReadConfig([]byte("port: 4222"), "2.15.2"); err == nil {
			t.Error("no error")
		}
	})
}

// legacy loads objects as the release before separate revisions wrote them.
func legacy(t *testing.T, file string) (*rt.Objects, []render.RunningServer) {
	t.Helper()
	objs := rt.LoadObjects(t, "testdata/legacy-e57d870/"+file)
	// Since e57d870 every pod template gained the spreading across zones
	// and the exporter sidecar (spec.metrics, on by default): an upgrade
	// from that release restarts each server once, one at a time (the README
	// says so). The fixtures keep proving that objects equal to their target
	// keep their revision once their template has this release's spreading
	// and the cluster runs without the sidecar.
	objs.Cluster.Spec.Metrics.Enabled = new(false)
	fresh, err := render.Render(render.Input{Cluster: objs.Cluster, Trust: objs.Trust()})
	if err != nil {
		t.Fatal(err)
	}
	for i, sts := range objs.StatefulSets {
		sts.Spec.Template.Spec.Affinity = fresh.Servers[i].StatefulSet.Spec.Template.Spec.Affinity.DeepCopy()
	}
	var running []render.RunningServer
	for i, sts := range objs.StatefulSets {
		running = append(running, render.RunningServer{
			Ordinal: int32(i), StatefulSet: sts, Config: []byte(objs.ConfigMaps[i].Data[render.ConfigKey]),
		})
	}
	return objs, running
}

// An operator upgrade must not restart clusters: objects written by the
// previous release keep their revision when they equal the target apart from
// the revisions, and their templates are recognised without the
// template-revision annotation they lack.
func TestObjectsOfThePreviousReleaseKeepTheirRevision(t *testing.T) {
	for _, file := range []string{"jetstream-claim.yaml", "ephemeral.yaml", "operator-mode.yaml"} {
		t.Run(file, func(t *testing.T) {
			objs, running := legacy(t, file)
			legacyRev := objs.Cluster.Status.Config.Revision
			out, err := render.Render(render.Input{Cluster: objs.Cluster, Trust: objs.Trust(), Running: running})
			if err != nil {
				t.Fatal(err)
			}
			if out.Revision != legacyRev {
				t.Fatalf("revision %s, want the legacy %s kept", out.Revision, legacyRev)
			}
			for i, s := range out.Servers {
				if !apiequality.Semantic.DeepEqual(s.ConfigMap.Data, objs.ConfigMaps[i].Data) {
					t.Errorf("%s: the ConfigMap would be rewritten", s.Name)
				}
				if got := render.TemplateRevisionOf(objs.StatefulSets[i]); got != s.TemplateRevision {
					t.Errorf("%s: legacy template revision %q, target %q", s.Name, got, s.TemplateRevision)
				}
				// The target differs from the legacy template only by the
				// annotation it lacks.
				want := s.StatefulSet.Spec.Template.DeepCopy()
				delete(want.Annotations, clusterv1beta1.AnnotationTemplateRevision)
				if !apiequality.Semantic.DeepEqual(*want, objs.StatefulSets[i].Spec.Template) {
					t.Errorf("%s: the template differs beyond the template-revision annotation", s.Name)
				}
			}

			fresh, err := render.Render(render.Input{Cluster: objs.Cluster, Trust: objs.Trust()})
			if err != nil {
				t.Fatal(err)
			}
			if fresh.Revision == legacyRev {
				t.Fatalf("without the running objects the revision is also %s: the test proves nothing", legacyRev)
			}

			changed := objs.Cluster.DeepCopy()
			changed.Spec.Version = "2.15.1"
			moved, err := render.Render(render.Input{Cluster: changed, Trust: objs.Trust(), Running: running})
			if err != nil {
				t.Fatal(err)
			}
			if moved.Revision == legacyRev {
				t.Errorf("a changed spec kept the legacy revision %s", legacyRev)
			}
		})
	}
}

// A revision is kept only by the servers whose objects equal their target:
// a server edited by hand, missing, or restarted for another revision gets
// the computed revision, the others keep theirs, and the cluster's revision
// is then no longer the legacy one.
func TestARevisionIsKeptOnlyByTheServersThatEqualTheirTarget(t *testing.T) {
	objs, running := legacy(t, "jetstream-claim.yaml")
	legacyRev := objs.Cluster.Status.Config.Revision
	// The computed revisions of the cluster as it exists (its StatefulSets
	// project no leaf credentials Secret, unlike a new cluster's), none
	// kept: a running server beyond the spec's, whose revision nobody keeps.
	beyond := render.RunningServer{Ordinal: 99, StatefulSet: running[0].StatefulSet}
	fresh, err := render.Render(render.Input{Cluster: objs.Cluster, Running: []render.RunningServer{beyond}})
	if err != nil {
		t.Fatal(err)
	}
	edited := append([]render.RunningServer(nil), running...)
	sts := edited[1].StatefulSet.DeepCopy()
	sts.Spec.Template.Spec.Containers[0].Image = "nats:2.15.1"
	edited[1].StatefulSet = sts
	otherRev := append([]render.RunningServer(nil), running...)
	otherRev[2].StatefulSet = withRestartRevision(running[2].StatefulSet, "0123456789")
	for _, tt := range []struct {
		name    string
		running []render.RunningServer
		odd     int
	}{
		{"a template edited by hand", edited, 1},
		{"a server missing", running[:2], 2},
		{"a pod restarted for another revision", otherRev, 2},
	} {
		out, err := render.Render(render.Input{Cluster: objs.Cluster, Running: tt.running})
		if err != nil {
			t.Fatal(err)
		}
		if out.Revision == legacyRev {
			t.Errorf("%s: the cluster kept the legacy revision", tt.name)
		}
		for i, s := range out.Servers {
			want := legacyRev
			if i == tt.odd {
				want = fresh.Servers[i].Revision
			}
			if s.Revision != want {
				t.Errorf("%s: %s has revision %s, want %s", tt.name, s.Name, s.Revision, want)
			}
		}
	}
}

// Adding servers changes no existing server's objects (what a step writes:
// the ConfigMap, the StatefulSet's spec and labels; the created-for
// annotation is written only at creation): routes list the seed servers only
// (render.SeedServers), and each server's revision is its own.
// The servers of a cluster of fewer than three gain routes on the way to
// three, so their objects change.
func TestAddingServersLeavesTheRunningServersObjectsAlone(t *testing.T) {
	for _, from := range []int32{1, 2, 3, 4} {
		for _, to := range []int32{from + 1, from + 2, 7} {
			opts := []rt.ClusterOption{rt.JetStream(), rt.Claim("1Gi", ""), rt.Replicas(from)}
			if from < 2 {
				opts = []rt.ClusterOption{rt.Replicas(from)} // the CRD refuses one server with JetStream
			}
			nc := rt.NewCluster("default", "demo", opts...)
			small, err := render.Render(render.Input{Cluster: nc})
			if err != nil {
				t.Fatal(err)
			}
			nc.Spec.Replicas = to
			big, err := render.Render(render.Input{Cluster: nc})
			if err != nil {
				t.Fatal(err)
			}
			if small.Revision == big.Revision {
				t.Errorf("%d -> %d servers: the cluster revision %s did not change", from, to, small.Revision)
			}
			for i, s := range small.Servers {
				b := big.Servers[i]
				same := s.Revision == b.Revision && bytes.Equal(s.Config, b.Config) &&
					apiequality.Semantic.DeepEqual(s.StatefulSet.Spec, b.StatefulSet.Spec) &&
					apiequality.Semantic.DeepEqual(s.StatefulSet.Labels, b.StatefulSet.Labels) && apiequality.Semantic.DeepEqual(s.ConfigMap, b.ConfigMap)
				if wantSame := from >= render.SeedServers; same != wantSame {
					t.Errorf("%d -> %d servers: the objects of %s stay the same: %t, want %t", from, to, s.Name, same, wantSame)
				}
			}
		}
	}
}

func withRestartRevision(sts *appsv1.StatefulSet, rev string) *appsv1.StatefulSet {
	c := sts.DeepCopy()
	c.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision] = rev
	return c
}

// Another claim template leaves a running server's template revision alone:
// its StatefulSet's claim templates cannot change, so the change is made by
// growing the claim or replacing the server, never by a restart. A server
// without a StatefulSet gets the new claim template, and its revision says so.
func TestAClaimTemplateChangeDoesNotChangeARunningServersTemplateRevision(t *testing.T) {
	nc := rt.NewCluster("default", "demo", rt.JetStream(), rt.Claim("1Gi", ""))
	before, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	running := []render.RunningServer{{Ordinal: 0, StatefulSet: before.Servers[0].StatefulSet}, {Ordinal: 1, StatefulSet: before.Servers[1].StatefulSet}}
	grown := rt.NewCluster("default", "demo", rt.JetStream(), rt.Claim("2Gi", ""))
	after, err := render.Render(render.Input{Cluster: grown, Running: running})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if b, a := before.Servers[i].TemplateRevision, after.Servers[i].TemplateRevision; a != b {
			t.Errorf("%s: template revision %s -> %s for a claim template change", after.Servers[i].Name, b, a)
		}
		if q := after.Servers[i].StatefulSet.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; q.String() != "2Gi" {
			t.Errorf("%s: the target claim template asks for %s, want 2Gi", after.Servers[i].Name, q.String())
		}
	}
	if b, a := before.Servers[2].TemplateRevision, after.Servers[2].TemplateRevision; a == b {
		t.Errorf("demo-2 (no StatefulSet): template revision %s unchanged, want the new claim template in it", a)
	}
}

// A running server whose StatefulSet's claim templates carry apiVersion and
// kind (as the API server may return them) keeps its template revision, with
// the same claim template or another.
func TestClaimTemplatesWithAPIVersionAndKindKeepTheTemplateRevision(t *testing.T) {
	nc := rt.NewCluster("default", "demo", rt.JetStream(), rt.Claim("1Gi", ""))
	before, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	var running []render.RunningServer
	for i := range 3 {
		sts := before.Servers[i].StatefulSet.DeepCopy()
		for j := range sts.Spec.VolumeClaimTemplates {
			sts.Spec.VolumeClaimTemplates[j].TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}
		}
		running = append(running, render.RunningServer{Ordinal: int32(i), StatefulSet: sts})
	}
	for _, spec := range []*clusterv1beta1.NatsCluster{nc, rt.NewCluster("default", "demo", rt.JetStream(), rt.Claim("2Gi", ""))} {
		after, err := render.Render(render.Input{Cluster: spec, Running: running})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if b, a := before.Servers[i].TemplateRevision, after.Servers[i].TemplateRevision; a != b {
				t.Errorf("%s: template revision %s -> %s", after.Servers[i].Name, b, a)
			}
		}
	}
}
