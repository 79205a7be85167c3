package render_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// loadRendered writes a rendered config with its /data and /var/run/nats
// paths moved under a temporary directory (the resolver creates its
// directory while the config is parsed) and loads it with nats-server's own
// config parser. Everything else is parsed as rendered.
func loadRendered(t *testing.T, cfg []byte) *server.Options {
	t.Helper()
	dir := t.TempDir()
	cfg = bytes.ReplaceAll(cfg, []byte(`"`+render.DataDir+`/`), []byte(`"`+dir+render.DataDir+`/`))
	cfg = bytes.ReplaceAll(cfg, []byte(`"`+render.PidDir+`/`), []byte(`"`+dir+render.PidDir+`/`))
	file := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(file, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatalf("nats-server refused the rendered config: %v\n%s", err, cfg)
	}
	return opts
}

func TestRenderedConfigsLoadInNatsServer(t *testing.T) {
	trust := rt.NewTrust(t, rt.WithAccounts("orders", "events"))
	bare := rt.NewTrust(t, rt.WithoutSystemAccountInOperator(), rt.WithIdentityIssuer(), rt.WithAccounts("app"))

	type want struct {
		jetStream     bool
		maxMemory     int64 // 0: unset, nats-server picks
		maxStore      int64
		domain        string
		tags          []string
		operator      string
		systemAccount string
		cacheResolver bool
		memResolver   bool
	}
	tests := []struct {
		name    string
		cluster *clusterv1beta1.NatsCluster
		trust   *rt.Fixture
		want    want
	}{
		{name: "one server without JetStream", cluster: rt.NewCluster("ns", "a", rt.Replicas(1))},
		{name: "three servers without JetStream", cluster: rt.NewCluster("ns", "b")},
		{name: "three servers with JetStream on an emptyDir and no limits", cluster: rt.NewCluster("ns", "c", rt.JetStream()),
			want: want{jetStream: true}},
		{name: "JetStream limits derive from the memory limit and the claim",
			cluster: rt.NewCluster("ns", "d", rt.Claim("10Gi", ""), rt.MemoryLimit("1Gi")),
			want:    want{jetStream: true, maxMemory: 805306368, maxStore: 10200547328}},
		{name: "explicit JetStream limits win over derived ones",
			cluster: rt.NewCluster("ns", "e", rt.Claim("10Gi", ""), rt.MemoryLimit("1Gi"), rt.JetStreamLimits("256Mi", "2G")),
			want:    want{jetStream: true, maxMemory: 268435456, maxStore: 2000000000}},
		{name: "a JetStream domain and server tags",
			cluster: rt.NewCluster("ns", "f", rt.Domain("hub"), rt.ServerTag("region", "eu"), rt.ServerTag("az", "1")),
			want:    want{jetStream: true, domain: "hub", tags: []string{"az:1", "region:eu"}}},
		{name: "five servers with JetStream", cluster: rt.NewCluster("ns", "g", rt.Replicas(5), rt.Claim("1Gi", "")),
			want: want{jetStream: true, maxStore: 1020054732}},
		{name: "operator mode with the full resolver and no accounts",
			cluster: rt.NewCluster("ns", "h", rt.Auth("trust")), trust: trust,
			want: want{operator: "op", systemAccount: "sys"}},
		{name: "operator mode with two account trusts and JetStream",
			cluster: rt.NewCluster("ns", "i", rt.Claim("5Gi", ""), rt.MemoryLimit("512Mi"), rt.Auth("trust", "orders", "events")), trust: trust,
			want: want{jetStream: true, maxMemory: 402653184, maxStore: 5100273664, operator: "op", systemAccount: "sys"}},
		{name: "operator mode with the cache resolver",
			cluster: rt.NewCluster("ns", "j", rt.Auth("trust", "orders"), rt.Resolver(clusterv1beta1.ResolverCache)), trust: trust,
			want: want{operator: "op", systemAccount: "sys", cacheResolver: true}},
		{name: "operator mode with the memory resolver",
			cluster: rt.NewCluster("ns", "n", rt.JetStream(), rt.Auth("trust", "orders"), rt.Resolver(clusterv1beta1.ResolverMemory)), trust: trust,
			want: want{jetStream: true, operator: "op", systemAccount: "sys", memResolver: true}},
		{name: "operator mode whose operator JWT names no system account",
			cluster: rt.NewCluster("ns", "k", rt.Replicas(2), rt.JetStream(), rt.Auth("bare", "app")), trust: bare,
			want: want{jetStream: true, operator: "op", systemAccount: "sys"}},
		{name: "spec.lameDuck with a longer duration and a short grace period", cluster: rt.NewCluster("ns", "m", rt.LameDuck("45s", "1s"))},
		{name: "a 2.10 server in operator mode", cluster: rt.NewCluster("ns", "l", rt.Version("2.10.29"), rt.JetStream(), rt.Auth("trust")), trust: trust,
			want: want{jetStream: true, operator: "op", systemAccount: "sys"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := render.Input{Cluster: tt.cluster}
			if tt.trust != nil {
				in.Trust = tt.trust.Trust()
			}
			out, err := render.Render(in)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got, want := len(out.Servers), int(tt.cluster.Spec.Replicas); got != want {
				t.Fatalf("rendered %d servers, want %d", got, want)
			}
			for _, s := range out.Servers {
				o := loadRendered(t, s.Config)
				check := func(what string, got, want any) {
					t.Helper()
					if got != want {
						t.Errorf("%s: %s = %v, want %v", s.Name, what, got, want)
					}
				}
				check("server name", o.ServerName, s.Name)
				check("client port", o.Port, int(render.ClientPort))
				check("monitor port", o.HTTPPort, int(render.MonitorPort))
				check("cluster name", o.Cluster.Name, tt.cluster.Name)
				check("cluster port", o.Cluster.Port, int(render.ClusterPort))
				check("routes", len(o.Routes), int(max(min(tt.cluster.Spec.Replicas, render.SeedServers), s.Ordinal+1)))
				duration, grace := render.LameDuckOf(&tt.cluster.Spec)
				check("lame duck duration", o.LameDuckDuration, duration.Duration)
				check("lame duck grace period", o.LameDuckGracePeriod, grace.Duration)
				check("config revision", o.Metadata["config_revision"], s.Revision)
				check("pid file suffix", filepath.Base(o.PidFile), "nats.pid")
				check("JetStream", o.JetStream, tt.want.jetStream)
				check("JetStream max memory", o.JetStreamMaxMemory, tt.want.maxMemory)
				check("JetStream max store", o.JetStreamMaxStore, tt.want.maxStore)
				check("JetStream domain", o.JetStreamDomain, tt.want.domain)
				if tt.want.jetStream {
					check("store dir suffix", filepath.Base(o.StoreDir), "jetstream")
				}
				var tags []string
				for _, tag := range o.Tags {
					tags = append(tags, tag)
				}
				if !slices.Equal(tags, tt.want.tags) {
					t.Errorf("%s: tags = %v, want %v", s.Name, tags, tt.want.tags)
				}
				switch tt.want.operator {
				case "":
					check("trusted operators", len(o.TrustedOperators), 0)
					check("system account", o.SystemAccount, "")
					check("auth mode", out.Auth.Enabled(), false)
				default:
					opKey, _ := tt.trust.Operator.PublicKey()
					if len(o.TrustedOperators) != 1 {
						t.Fatalf("%s: %d trusted operators, want 1", s.Name, len(o.TrustedOperators))
					}
					check("operator", o.TrustedOperators[0].Subject, opKey)
					check("system account", o.SystemAccount, tt.trust.System.PublicKey)
					check("auth mode operator", out.Auth.Operator, opKey)
					check("auth mode system account", out.Auth.SystemAccount, tt.trust.System.PublicKey)
					_, isCache := o.AccountResolver.(*server.CacheDirAccResolver)
					_, isFull := o.AccountResolver.(*server.DirAccResolver)
					_, isMem := o.AccountResolver.(*server.MemAccResolver)
					check("cache resolver", isCache, tt.want.cacheResolver)
					check("memory resolver", isMem, tt.want.memResolver)
					check("full resolver", isFull, !tt.want.cacheResolver && !tt.want.memResolver)
				}
			}
		})
	}
}
