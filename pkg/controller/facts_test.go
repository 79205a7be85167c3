package controller

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/jwt/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// The facts the planner compares are read back from the configs render
// writes, so a running server's ConfigMap and the target describe
// themselves the same way.
func TestConfigFactsReadRenderedConfigs(t *testing.T) {
	fx := rendertest.NewTrust(t, rendertest.WithAccounts("app"))
	tests := []struct {
		name  string
		nc    *clusterv1beta1.NatsCluster
		trust *render.Trust
		want  rollout.ConfigFacts
	}{
		{
			name: "a cluster without auth or JetStream has only its version and name",
			nc:   rendertest.NewCluster("ns", "demo", rendertest.Replicas(3), rendertest.Version("2.15.2")),
			want: rollout.ConfigFacts{Version: "2.15.2", ClusterName: "demo"},
		},
		{
			name: "JetStream limits, domain and server tags are read as the server would",
			nc: rendertest.NewCluster("ns", "demo", rendertest.Replicas(3), rendertest.Version("2.15.1"),
				rendertest.JetStream(), rendertest.Domain("hub"), rendertest.ServerTag("zone", "a"),
				rendertest.JetStreamLimits("1Gi", "10Gi")),
			want: rollout.ConfigFacts{Version: "2.15.1", ClusterName: "demo", JetStream: true, JetStreamDomain: "hub",
				MaxMemoryStore: 1 << 30, MaxFileStore: 10 << 30, ServerTags: []string{"zone:a"}},
		},
		{
			name:  "operator mode names the NATS operator, the system account and the preloaded accounts",
			nc:    rendertest.NewCluster("ns", "demo", rendertest.Replicas(1), rendertest.Version("2.15.2"), rendertest.Auth("demo", "app")),
			trust: fx.Trust(),
			want: rollout.ConfigFacts{Version: "2.15.2", ClusterName: "demo", Operator: operatorKey(t, fx.OperatorJWT),
				SystemAccount: fx.System.PublicKey, Accounts: []string{fx.Accounts[0].PublicKey}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render.Render(render.Input{Cluster: tt.nc, Trust: tt.trust})
			if err != nil {
				t.Fatal(err)
			}
			got := configFacts(out.Servers[0].Config, imageVersion(out.Servers[0].StatefulSet))
			slices.Sort(got.Accounts)
			slices.Sort(tt.want.Accounts)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
			if changes := rollout.Classify(got, configFacts(out.Servers[len(out.Servers)-1].Config, tt.nc.Spec.Version)); len(changes) != 0 {
				t.Errorf("the target differs from itself: %v", changes)
			}
		})
	}
}

// A config that cannot be read gives facts that match no target, so a
// server with a damaged ConfigMap is never taken as up to date.
func TestConfigFactsOfAnUnreadableConfigDifferFromAnyTarget(t *testing.T) {
	got := configFacts([]byte("not json"), "2.15.2")
	if got.ClusterName != "" || got.JetStream {
		t.Errorf("facts of garbage: %+v", got)
	}
}

func operatorKey(t *testing.T, token string) string {
	t.Helper()
	oc, err := jwt.DecodeOperatorClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	return oc.Subject
}

func TestImageVersionIsTheTag(t *testing.T) {
	for image, want := range map[string]string{
		"nats:2.15.2": "2.15.2",
		"registry.example.com:5000/nats:2.15.1@sha256:0123": "2.15.1",
		"registry.example.com:5000/nats":                    "",
	} {
		nc := rendertest.NewCluster("ns", "demo", rendertest.Replicas(1), rendertest.Version("2.15.2"))
		out, err := render.Render(render.Input{Cluster: nc})
		if err != nil {
			t.Fatal(err)
		}
		sts := out.Servers[0].StatefulSet
		sts.Spec.Template.Spec.Containers[0].Image = image
		if got := imageVersion(sts); got != want {
			t.Errorf("imageVersion(%q) = %q, want %q", image, got, want)
		}
	}
}
