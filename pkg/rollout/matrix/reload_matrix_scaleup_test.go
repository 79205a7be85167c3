package matrix

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// TestScaleUpRouteGossip establishes, with real nats-server processes, that
// scaling a cluster up needs no change on the servers already running: route
// routes solicited by the new servers and JetStream take them in. render
// relies on it: a server's cluster.routes names the first render.SeedServers
// servers and every server before it, never one after it.
//
// Servers 0..2 run a 3-server render of a NatsCluster (their cluster.routes
// name servers 0..2) and hold an R3 stream. Servers 3 and 4 then start from a
// 5-server render of the same NatsCluster (demo-3's routes name 0..3,
// demo-4's 0..4); servers 0..2 are not touched. The test records whether every server routes to the
// 4 others (/routez), whether the JetStream meta group has 5 members with one
// leader that sees the 4 others current (/jsz), and whether the stream keeps
// its leader and replicas and takes writes through all 5 servers; and asserts
// what nats-server 2.15 does, so an upgrade that changes it fails here.
//
// A second layout, servers 3 and 4 naming the seeds 0..2 only, shows why a
// server also names the servers before it: route gossip then never connects
// demo-3 and demo-4 to each other.
func TestScaleUpRouteGossip(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	for _, tt := range []struct {
		name string
		// seedsOnly cuts the added servers' routes to the seeds.
		seedsOnly bool
		want      scaleUp
		wait      time.Duration
	}{
		{"the rendered routes: the seeds and every server before", false, scaleUp{mesh: true, meta: true, placementKept: true, writable: true}, 30 * time.Second},
		{"the seeds only", true, scaleUp{mesh: false, meta: true, placementKept: true, writable: true}, 15 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runScaleUp(t, tt.seedsOnly, tt.wait)
			if got.mesh != tt.want.mesh || got.meta != tt.want.meta || got.placementKept != tt.want.placementKept || got.writable != tt.want.writable {
				t.Errorf("scale-up from 3 to 5 servers without touching the 3: mesh=%t meta=%t placement kept=%t writable=%t, want %t %t %t %t (%s)",
					got.mesh, got.meta, got.placementKept, got.writable, tt.want.mesh, tt.want.meta, tt.want.placementKept, tt.want.writable, got.detail)
			}
		})
	}
}

// runScaleUp starts servers 0..2 on a 3-server render with an R3 stream,
// then servers 3 and 4 on a 5-server render, and observes the 5 for up to
// wait (all of it when something never holds).
func runScaleUp(t *testing.T, seedsOnly bool, wait time.Duration) scaleUp {
	bin := natsBinary(t, rendertest.DefaultVersion)
	base := rendertest.JetStreamLimits("256Mi", "1Gi")
	three := matrixSpec{cluster: rendertest.NewCluster(matrixNamespace, "demo", base)}.render(t)
	five := matrixSpec{cluster: rendertest.NewCluster(matrixNamespace, "demo", base, rendertest.Replicas(5))}.render(t)
	locals, routes := rendertest.LocalAddresses(t, five, matrixNamespace, "demo")

	servers := make([]*natsServer, len(five.Servers))
	runs := make([]serverRun, len(five.Servers))
	for i := range five.Servers {
		s, want := five.Servers[i], max(render.SeedServers, i+1)
		if i < len(three.Servers) {
			s = three.Servers[i]
		}
		if n := routeCount(t, s.Config); n != want {
			t.Fatalf("%s's rendered config lists %d routes, want %d", s.Name, n, want)
		}
		conf := s.Config
		if seedsOnly {
			conf = cutRoutes(t, conf, render.SeedServers)
		}
		cfg, err := rendertest.LocalizeConfig(conf, locals[i], routes)
		if err != nil {
			t.Fatalf("localizing %s: %v", s.Name, err)
		}
		runs[i] = serverRun{Name: s.Name, Binary: bin, Config: cfg, JetStream: true}
		servers[i] = &natsServer{local: locals[i]}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.stop()
		}
	})
	for i := range 3 {
		servers[i].start(t, runs[i])
	}
	acked := 0
	if st := observeStage(servers[:3], false, &acked, 60*time.Second); !st.ok() {
		t.Fatalf("the 3 servers did not form a cluster: %s (%s)", st, st.detail)
	}
	acked = createStream(t, servers[0])
	before, err := placement(servers[0])
	if err != nil {
		t.Fatalf("reading the stream's placement: %v", err)
	}

	start := time.Now()
	for i := 3; i < 5; i++ {
		servers[i].start(t, runs[i])
	}
	got := observeScaleUp(servers, before, &acked, wait)
	t.Logf("after starting servers 3 and 4 (%s): full route mesh=%t, meta group of 5=%t (cluster_size %d, leader %s), stream kept its placement=%t, stream writable through all 5=%t; %s",
		time.Since(start).Round(100*time.Millisecond), got.mesh, got.meta, got.metaSize, got.metaLeader, got.placementKept, got.writable, got.detail)
	t.Logf("stream placement before: %s; after: %s", before, got.placement)
	return got
}

// cutRoutes keeps the first n of a rendered config's cluster.routes.
func cutRoutes(t *testing.T, cfg []byte, n int) []byte {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal(cfg, &c); err != nil {
		t.Fatal(err)
	}
	cl := c["cluster"].(map[string]any)
	if r := cl["routes"].([]any); len(r) > n {
		cl["routes"] = r[:n]
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// routeCount is the number of cluster.routes of a rendered config.
func routeCount(t *testing.T, cfg []byte) int {
	t.Helper()
	var c struct {
		Cluster struct {
			Routes []string `json:"routes"`
		} `json:"cluster"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		t.Fatal(err)
	}
	return len(c.Cluster.Routes)
}

// streamPlacement is where the stream's copies are: its leader and the
// servers of its replicas, sorted.
type streamPlacement struct {
	leader   string
	replicas []string
}

func (p streamPlacement) String() string {
	return fmt.Sprintf("leader %s, replicas %s", p.leader, strings.Join(p.replicas, ","))
}

func (p streamPlacement) equal(o streamPlacement) bool {
	return p.leader == o.leader && slices.Equal(p.replicas, o.replicas)
}

func placement(s *natsServer) (streamPlacement, error) {
	nc, js, err := connect(s)
	if err != nil {
		return streamPlacement{}, err
	}
	defer nc.Close()
	info, err := js.StreamInfo(streamName)
	if err != nil {
		return streamPlacement{}, err
	}
	if info.Cluster == nil {
		return streamPlacement{}, fmt.Errorf("stream %s has no cluster info", streamName)
	}
	p := streamPlacement{leader: info.Cluster.Leader}
	for _, r := range info.Cluster.Replicas {
		p.replicas = append(p.replicas, r.Name)
	}
	slices.Sort(p.replicas)
	return p, nil
}

// scaleUp is what the 5 servers show after servers 3 and 4 joined.
type scaleUp struct {
	// mesh: every server routes to the 4 others.
	mesh bool
	// meta: the meta group has one leader that counts 5 servers and sees the
	// 4 others current.
	meta       bool
	metaSize   int
	metaLeader string
	// placementKept: the stream has the leader and replicas it had on 3
	// servers; writable: it takes writes through every server with its
	// replicas current.
	placementKept, writable bool
	placement               streamPlacement
	detail                  string
}

// observeScaleUp polls until everything holds at once, or the wait runs
// out. At the deadline each property reports whether it held in any sample:
// a property that never holds (the seeds-only mesh) reads false, and one
// that holds but flickers (a replica briefly not current right after a
// write) reads true, so a single unlucky sample does not decide the answer.
func observeScaleUp(servers []*natsServer, before streamPlacement, acked *int, wait time.Duration) scaleUp {
	deadline := time.Now().Add(wait)
	var ever scaleUp
	for {
		var got scaleUp
		var details []string
		got.mesh = true
		for _, s := range servers {
			to := s.routedTo()
			for _, o := range servers {
				if o != s && !to[o.name()] {
					got.mesh = false
					details = append(details, s.name()+" has no route to "+o.name())
				}
			}
		}
		whole, d := metaWhole(servers)
		if d != "" {
			details = append(details, d)
		}
		if m, ok := servers[0].meta(); ok {
			got.metaLeader = m.Leader
			for _, s := range servers {
				if s.name() == m.Leader {
					if lm, ok := s.meta(); ok {
						got.metaSize = lm.Size
						got.meta = whole && lm.Size == len(servers) && len(lm.Replicas) == len(servers)-1
					}
				}
			}
		}
		if whole && !got.meta {
			details = append(details, fmt.Sprintf("the meta leader counts %d servers", got.metaSize))
		}
		p, err := placement(servers[0])
		if err != nil {
			details = append(details, "reading the stream's placement: "+err.Error())
		}
		got.placement, got.placementKept = p, err == nil && p.equal(before)
		got.writable, d = streamWritable(servers, acked)
		if d != "" {
			details = append(details, d)
		}
		got.detail = strings.Join(details, "; ")
		if got.mesh && got.meta && got.placementKept && got.writable {
			return got
		}
		ever.mesh = ever.mesh || got.mesh
		ever.meta = ever.meta || got.meta
		ever.placementKept = ever.placementKept || got.placementKept
		ever.writable = ever.writable || got.writable
		if time.Now().After(deadline) {
			got.mesh, got.meta, got.placementKept, got.writable = ever.mesh, ever.meta, ever.placementKept, ever.writable
			return got
		}
		time.Sleep(300 * time.Millisecond)
	}
}
