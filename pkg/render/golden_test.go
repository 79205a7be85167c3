package render_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

var (
	update      = flag.Bool("update", false, "rewrite the golden files under testdata/golden")
	updateTrust = flag.Bool("update-trust", false, "make a new fixed trust in testdata/trust.json")
)

var trustUpdated bool

// fixedTrust is a trust with two accounts stored in testdata/trust.json, so
// golden files stay byte-for-byte stable (JWTs carry their issue time).
func fixedTrust(t *testing.T) *render.Trust {
	t.Helper()
	path := filepath.Join("testdata", "trust.json")
	if *updateTrust && !trustUpdated {
		trustUpdated = true
		f := rt.NewTrust(t, rt.WithAccounts("orders", "events"))
		b, err := json.MarshalIndent(f.Trust(), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the fixed trust (go test -update-trust makes one): %v", err)
	}
	var tr render.Trust
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	return &tr
}

// outputYAML is every object of out as a YAML stream, the revision first.
func outputYAML(t *testing.T, out *render.Output) []byte {
	t.Helper()
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# revision: %s\n# auth: %s\n", out.Revision, out.Auth)
	objs := []any{out.ClientService, out.HeadlessService, out.PDB}
	for _, s := range out.Servers {
		fmt.Fprintf(&buf, "# server %s: config revision %s, template revision %s\n", s.Name, s.Revision, s.TemplateRevision)
		objs = append(objs, s.ConfigMap, s.StatefulSet)
	}
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes()
}

func TestGoldenFiles(t *testing.T) {
	tests := []struct {
		name       string
		file       string
		cluster    *clusterv1beta1.NatsCluster
		trust      bool
		systemUser *render.SystemUser
	}{
		{
			name:    "one server without JetStream",
			file:    "one-server-no-jetstream",
			cluster: rt.NewCluster("ns", "demo", rt.Replicas(1)),
		},
		{
			name: "three servers with JetStream, a claim template and memory limits",
			file: "three-servers-jetstream-claim-memory",
			cluster: rt.NewCluster("ns", "demo", rt.Replicas(3), rt.Claim("10Gi", "fast"), rt.MemoryLimit("1Gi"),
				rt.CPURequest("500m"), rt.Domain("hub"), rt.ServerTag("region", "eu-west-1"), rt.ServerTag("az", "b")),
		},
		{
			name:       "three servers with JetStream and the controller's system user",
			file:       "three-servers-jetstream-system-user",
			cluster:    rt.NewCluster("ns", "demo", rt.Replicas(3), rt.Claim("10Gi", ""), rt.MemoryLimit("1Gi")),
			systemUser: rt.SystemUser(),
		},
		{
			name: "operator mode with two account trusts",
			file: "operator-mode-two-accounts",
			cluster: rt.NewCluster("ns", "demo", rt.Replicas(3), rt.Claim("10Gi", ""), rt.MemoryLimit("2Gi"),
				rt.Auth("demo-trust", "orders", "events")),
			trust: true,
		},
		{
			name: "operator mode with the cache resolver on version 2.10",
			file: "operator-mode-cache-resolver-2.10",
			cluster: rt.NewCluster("ns", "legacy", rt.Replicas(2), rt.Version("2.10.29"), rt.JetStream(),
				rt.Image("registry.example/nats", "sha256:"+sixtyFour("a")), rt.Auth("demo-trust", "orders", "events"),
				rt.Resolver(clusterv1beta1.ResolverCache)),
			trust: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := render.Input{Cluster: tt.cluster, SystemUser: tt.systemUser}
			if tt.trust {
				in.Trust = fixedTrust(t)
			}
			out, err := render.Render(in)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			got := outputYAML(t, out)
			path := filepath.Join("testdata", "golden", tt.file+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading golden file (go test ./pkg/render -update writes it): %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("rendered objects differ from %s (-want +got):\n%s", path, diff)
			}
		})
	}
}

func sixtyFour(c string) string {
	s := ""
	for range 64 {
		s += c
	}
	return s
}
