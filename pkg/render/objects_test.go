package render_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

func TestNames(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"a server is named after the cluster and its ordinal", render.ServerName("demo", 2), "demo-2"},
		{"a server's StatefulSet carries the server name", render.StatefulSetName("demo", 2), "demo-2"},
		{"a server's only pod is ordinal 0 of its StatefulSet", render.PodName("demo", 2), "demo-2-0"},
		{"a server's ConfigMap ends in -config", render.ConfigMapName("demo", 2), "demo-2-config"},
		{"a server's claim is data-<pod>", render.PVCName("demo", 2), "data-demo-2-0"},
		{"the client Service is the cluster name", render.ClientServiceName("demo"), "demo"},
		{"the headless Service ends in -headless", render.HeadlessServiceName("demo"), "demo-headless"},
		{"the PDB is the cluster name", render.PDBName("demo"), "demo"},
		{"a route goes through the headless Service", render.RouteURL("demo", "ns", 1), "nats://demo-1-0.demo-headless.ns.svc:6222"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestServerOrdinal(t *testing.T) {
	tests := []struct {
		name   string
		server string
		want   int32
		ok     bool
	}{
		{"a server name gives its ordinal", "demo-12", 12, true},
		{"ordinal 0 parses", "demo-0", 0, true},
		{"another cluster's server does not parse", "other-1", 0, false},
		{"a pod name does not parse", "demo-1-0", 0, false},
		{"a leading zero does not parse", "demo-01", 0, false},
		{"a missing ordinal does not parse", "demo-", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := render.ServerOrdinal("demo", tt.server)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ServerOrdinal(demo, %s) = %d, %v; want %d, %v", tt.server, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestEveryObjectCarriesLabelsAndOwner(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.Claim("1Gi", ""))
	out, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	owner := []metav1.OwnerReference{render.OwnerReference(nc)}
	if o := owner[0]; o.APIVersion != "cluster.nats-operator.io/v1beta1" || o.Kind != "NatsCluster" || o.Name != "demo" ||
		o.UID != nc.UID || !*o.Controller || !*o.BlockOwnerDeletion {
		t.Errorf("owner reference = %+v", o)
	}
	check := func(what string, meta metav1.ObjectMeta, labels map[string]string) {
		t.Helper()
		if meta.Namespace != "ns" {
			t.Errorf("%s: namespace %q", what, meta.Namespace)
		}
		if diff := cmp.Diff(labels, meta.Labels); diff != "" {
			t.Errorf("%s labels (-want +got):\n%s", what, diff)
		}
		if diff := cmp.Diff(owner, meta.OwnerReferences); diff != "" {
			t.Errorf("%s owner references (-want +got):\n%s", what, diff)
		}
	}
	cl := map[string]string{
		"app.kubernetes.io/name": "nats", "app.kubernetes.io/instance": "demo",
		"app.kubernetes.io/managed-by": "nats-operator", "cluster.nats-operator.io/cluster": "demo",
	}
	check("client Service", out.ClientService.ObjectMeta, cl)
	check("headless Service", out.HeadlessService.ObjectMeta, cl)
	check("PDB", out.PDB.ObjectMeta, cl)
	for _, s := range out.Servers {
		sl := render.ServerLabels("demo", s.Ordinal)
		if sl["cluster.nats-operator.io/server"] != s.Name {
			t.Errorf("server labels %v lack the server", sl)
		}
		check(s.Name+" ConfigMap", s.ConfigMap.ObjectMeta, sl)
		check(s.Name+" StatefulSet", s.StatefulSet.ObjectMeta, sl)
		if diff := cmp.Diff(sl, s.StatefulSet.Spec.Template.Labels); diff != "" {
			t.Errorf("%s pod labels (-want +got):\n%s", s.Name, diff)
		}
		for _, c := range s.StatefulSet.Spec.VolumeClaimTemplates {
			if len(c.OwnerReferences) != 0 {
				t.Errorf("%s claim template has owner references: PVCs must outlive the cluster", s.Name)
			}
		}
		if got := s.StatefulSet.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision]; got != s.Revision {
			t.Errorf("%s pod template revision %q, want its config revision %q", s.Name, got, s.Revision)
		}
		if s.ConfigMap.Data[render.ConfigKey] != string(s.Config) {
			t.Errorf("%s ConfigMap does not hold the config", s.Name)
		}
	}
}

func TestPodsMeetTheRestrictedPodSecurityStandard(t *testing.T) {
	out, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo", rt.JetStream(), rt.MemoryLimit("1Gi"))})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Servers {
		pod := s.StatefulSet.Spec.Template.Spec
		psc := pod.SecurityContext
		if psc == nil || !*psc.RunAsNonRoot || *psc.RunAsUser != 1000 || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s pod security context = %+v", s.Name, psc)
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("%s mounts a service account token", s.Name)
		}
		for _, v := range pod.Volumes {
			if v.HostPath != nil {
				t.Errorf("%s uses a hostPath volume", s.Name)
			}
		}
		if len(pod.Containers) != 2 || pod.Containers[0].Name != "nats" || pod.Containers[1].Name != "metrics" {
			t.Fatalf("%s has containers %+v, want nats and metrics", s.Name, pod.Containers)
		}
		for _, c := range pod.Containers {
			sc := c.SecurityContext
			if sc == nil || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem ||
				len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
				t.Errorf("%s container %s security context = %+v", s.Name, c.Name, sc)
			}
		}
		c := pod.Containers[0]
		if len(c.Env) != 1 || c.Env[0].Name != "GOMEMLIMIT" || c.Env[0].Value != "966367641" {
			t.Errorf("%s env = %+v, want GOMEMLIMIT 966367641 (90%% of 1Gi)", s.Name, c.Env)
		}
		if grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; grace <= clusterv1beta1.DefaultLameDuckDuration+clusterv1beta1.DefaultLameDuckGracePeriod {
			t.Errorf("%s termination grace period %s does not outlast lame duck", s.Name, grace)
		}
		anti := pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		if len(anti) != 2 || anti[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" || anti[1].PodAffinityTerm.TopologyKey != "topology.kubernetes.io/zone" ||
			anti[0].PodAffinityTerm.LabelSelector.MatchLabels["cluster.nats-operator.io/cluster"] != "demo" {
			t.Errorf("%s anti-affinity = %+v", s.Name, anti)
		}
		if want := []string{"/nats-server", "--signal", "ldm=/var/run/nats/nats.pid"}; !cmp.Equal(c.Lifecycle.PreStop.Exec.Command, want) {
			t.Errorf("%s preStop = %v, want %v", s.Name, c.Lifecycle.PreStop.Exec.Command, want)
		}
	}
}

func TestProbePathsByVersion(t *testing.T) {
	current := render.ProbePaths{
		Startup:   "/healthz?js-meta-only=true",
		Readiness: "/healthz?js-server-only=true",
		Liveness:  "/healthz?js-enabled-only=true",
	}
	legacy := render.ProbePaths{
		Startup:   "/healthz?js-server-only=true",
		Readiness: "/healthz?js-enabled-only=true",
		Liveness:  "/healthz?js-enabled-only=true",
	}
	tests := []struct {
		name    string
		version string
		want    render.ProbePaths
	}{
		{"2.15 uses js-meta-only for startup", "2.15.2", current},
		{"2.11.0 is the first with js-meta-only", "2.11.0", current},
		{"a 2.11 release candidate counts as 2.11", "2.11.0-RC.2", current},
		{"2.10 waits for meta with js-server-only", "2.10.29", legacy},
		{"2.9 is treated like 2.10", "2.9.25", legacy},
		{"a version that does not parse gets the current flags", "latest", current},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render.ProbePathsFor(tt.version); got != tt.want {
				t.Errorf("ProbePathsFor(%s) = %+v, want %+v", tt.version, got, tt.want)
			}
			if tt.version == "latest" {
				return // Render refuses it (InvalidSpec: not a semantic version)
			}
			out, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo", rt.Version(tt.version), rt.JetStream())})
			if err != nil {
				t.Fatal(err)
			}
			c := out.Servers[0].StatefulSet.Spec.Template.Spec.Containers[0]
			got := render.ProbePaths{Startup: c.StartupProbe.HTTPGet.Path, Readiness: c.ReadinessProbe.HTTPGet.Path, Liveness: c.LivenessProbe.HTTPGet.Path}
			if got != tt.want {
				t.Errorf("rendered probes %+v, want %+v", got, tt.want)
			}
			if p := c.StartupProbe.HTTPGet.Port.IntValue(); p != 8222 {
				t.Errorf("startup probe port %d", p)
			}
		})
	}
}

func TestDeriveJetStreamLimits(t *testing.T) {
	tests := []struct {
		name              string
		cluster           *clusterv1beta1.NatsCluster
		wantMem, wantFile string // "" = nil
	}{
		{"75% of 1Gi memory and 95% of a 10Gi claim", rt.NewCluster("ns", "d", rt.MemoryLimit("1Gi"), rt.Claim("10Gi", "")), "805306368", "10200547328"},
		{"no memory limit and no claim leave both to nats-server", rt.NewCluster("ns", "d", rt.JetStream()), "", ""},
		{"explicit limits are kept as given", rt.NewCluster("ns", "d", rt.MemoryLimit("1Gi"), rt.JetStreamLimits("100Mi", "5Gi")), "100Mi", "5Gi"},
		{"odd byte counts round down", rt.NewCluster("ns", "d", rt.MemoryLimit("1001"), rt.Claim("999", "")), "750", "949"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := render.DeriveJetStreamLimits(&tt.cluster.Spec)
			same := func(q *resource.Quantity, want string) bool {
				if q == nil || want == "" {
					return q == nil && want == ""
				}
				return q.Cmp(resource.MustParse(want)) == 0
			}
			if !same(l.MaxMemoryStore, tt.wantMem) {
				t.Errorf("maxMemoryStore = %v, want %q", l.MaxMemoryStore, tt.wantMem)
			}
			if !same(l.MaxFileStore, tt.wantFile) {
				t.Errorf("maxFileStore = %v, want %q", l.MaxFileStore, tt.wantFile)
			}
		})
	}
	if l := render.DeriveJetStreamLimits(&rt.NewCluster("ns", "d").Spec); l != nil {
		t.Errorf("limits without JetStream = %+v, want nil", l)
	}
}

func TestUnrenderableSpecsAreRefused(t *testing.T) {
	tests := []struct {
		name    string
		cluster *clusterv1beta1.NatsCluster
	}{
		{"no cluster", nil},
		{"zero replicas", rt.NewCluster("ns", "demo", rt.Replicas(0))},
		{"no version", rt.NewCluster("ns", "demo", rt.Version(""))},
		{"no namespace", rt.NewCluster("", "demo")},
		{"a server tag with a control character", rt.NewCluster("ns", "demo", rt.ServerTag("team", "a\x01b"))},
		{"a server tag with a line separator", rt.NewCluster("ns", "demo", rt.ServerTag("team", "a\u2028b"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render.Render(render.Input{Cluster: tt.cluster})
			if err == nil || out != nil {
				t.Errorf("Render = %v, %v; want an error and nothing rendered", out, err)
			}
		})
	}
}

func TestServerTagsWithQuotesAndBackslashesLoad(t *testing.T) {
	out, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo", rt.ServerTag("path", `C:\x "y" <&>`))})
	if err != nil {
		t.Fatal(err)
	}
	o := loadRendered(t, out.Servers[0].Config)
	if len(o.Tags) != 1 || !strings.EqualFold(o.Tags[0], `path:C:\x "y" <&>`) {
		t.Errorf("tags = %q", o.Tags)
	}
}

// TestRenderNeverReadsTheClock: the time of a render is Input.Now.
func TestRenderNeverReadsTheClock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) < 5 {
		t.Fatalf("found %d files (%v): the check would prove nothing", len(files), err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, banned := range []string{"time.Now(", "time.Since(", "time.Until(", "time.After(", "time.Tick(", "time.NewTimer(", "time.Sleep("} {
			if strings.Contains(string(src), banned) {
				t.Errorf("%s uses %s", f, banned)
			}
		}
	}
}

func TestRenderImportsOnlyWhatItMay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	const pkg = "github.com/nats-operator/nats-operator/pkg/render"
	imports, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, imports)
	}
	allowed := []string{"github.com/nats-operator/nats-operator/pkg/apis/", "k8s.io/api/", "k8s.io/apimachinery/",
		"github.com/nats-io/jwt/v2", "github.com/nats-io/nkeys",
		// The Pod Security Standards checks, pure functions of a pod spec.
		"k8s.io/pod-security-admission/"}
	for _, imp := range strings.Fields(string(imports)) {
		std := !strings.Contains(strings.Split(imp, "/")[0], ".")
		// time for Input.Now's type and arithmetic only: the clock is never
		// read (TestRenderNeverReadsTheClock).
		ok := std && !slices.Contains([]string{"os", "os/exec", "net", "net/http", "math/rand", "math/rand/v2", "log", "log/slog"}, imp)
		for _, a := range allowed {
			ok = ok || strings.HasPrefix(imp, a)
		}
		if !ok {
			t.Errorf("pkg/render imports %s", imp)
		}
	}
	deps, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, deps)
	}
	for _, dep := range strings.Fields(string(deps)) {
		for _, banned := range []string{"k8s.io/client-go", "github.com/nats-io/nats-server", "github.com/nats-io/nats.go"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("pkg/render depends on %s", dep)
			}
		}
	}
}

func TestSharedObjectsAreTheOnesRenderReturns(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.JetStream())
	out, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	shared := render.SharedObjects(nc)
	if diff := cmp.Diff(render.Shared{ClientService: out.ClientService, HeadlessService: out.HeadlessService, PDB: out.PDB}, shared); diff != "" {
		t.Errorf("SharedObjects differs from Render (-render +shared):\n%s", diff)
	}
}
