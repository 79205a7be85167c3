package matrix

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	. "github.com/nats-operator/nats-operator/pkg/rollout"
)

// The gateway matrix: what a change of spec.gateway does to a supercluster
// when one of its clusters rolls it one server at a time. Two NatsClusters,
// east and west (3 servers each, namespaces east and west), are rendered by
// pkg/render with gateways referencing each other and run as real
// nats-server processes on loopback (rendertest.LocalizeSuperclusterConfig
// gives each headless Service's name the gateway ports of its servers, as
// its DNS name resolves to every one). An R3 stream placed in west
// (placement cluster west) is written. Then east moves from its old spec to
// its new one from the highest ordinal down, each server keeping its store.
//
// At every stage the test records R (each cluster's servers route to each
// other), G (every server of either cluster has an outbound gateway to the
// other cluster), M (one JetStream meta leader across all six servers,
// which sees the other five current) and W (the stream in west takes a
// write through every server of east, with its replicas current). A change
// splits the supercluster when a mixed stage fails any of them; the stream
// is kept when, once east runs its new spec, west still has it with every
// acknowledged message. Both must equal EffectOf of the case's kinds.
// Before the roll, east-2 is sent the new config as a reload (SIGHUP):
// whether nats-server accepts it must equal the kinds' Reloads (no case
// has auth, so ReloadsWithoutAuth too).

// gatewayCase is one change of east's spec; west's spec stays.
type gatewayCase struct {
	name     string
	kinds    []ChangeKind
	old, new matrixSpec
	west     matrixSpec
}

const westStream = "WEST_ORDERS"

func gatewayCases() []gatewayCase {
	base := []rendertest.ClusterOption{rendertest.JetStreamLimits("256Mi", "1Gi")}
	noJetStream := func(nc *clusterv1beta1.NatsCluster) { nc.Spec.JetStream = nil }
	spec := func(name string) func(opts ...rendertest.ClusterOption) matrixSpec {
		return func(opts ...rendertest.ClusterOption) matrixSpec {
			return matrixSpec{cluster: rendertest.NewCluster(name, name, slices.Concat(base, opts)...)}
		}
	}
	east, west := spec("east"), spec("west")
	toWest, toEast := rendertest.GatewayTo("west", "west"), rendertest.GatewayTo("east", "east")
	// Two of west's servers by their pod names: the headless Service's
	// name stands for all three, so the localized configs differ too.
	var westPods []string
	for i := range int32(2) {
		westPods = append(westPods, fmt.Sprintf("nats://%s:%d", render.PodHost("west", "west", i), render.GatewayPort))
	}
	westByURLs := clusterv1beta1.GatewayRemote{Name: "west", URLs: westPods}
	gateway := func(mutate func(*clusterv1beta1.GatewaySpec), remotes ...clusterv1beta1.GatewayRemote) rendertest.ClusterOption {
		return func(nc *clusterv1beta1.NatsCluster) {
			rendertest.Gateway(remotes...)(nc)
			mutate(nc.Spec.Gateway)
		}
	}
	reject := func(g *clusterv1beta1.GatewaySpec) { g.RejectUnknownCluster = true }
	advertise := func(g *clusterv1beta1.GatewaySpec) { g.Advertise = "east-gateway.example.com:7222" }
	one := func(k ChangeKind) []ChangeKind { return []ChangeKind{k} }
	superWest := west(rendertest.Gateway(toEast))
	// Gateway TLS: both clusters with route TLS (the certificate gateways
	// present), east's gateway with TLS or not; writeSuperclusterTLS
	// writes the files.
	withTLS := func(s matrixSpec, gatewayTLS bool) matrixSpec {
		s.tls.Routes = matrixTLSFiles
		if gatewayTLS {
			s.cluster.Spec.Gateway.TLS, s.cluster.Spec.Gateway.Insecure = &clusterv1beta1.GatewayTLS{}, false
			f := *matrixGatewayFiles
			f.CASecret = s.cluster.Name + render.GatewayCASuffix
			s.tls.Gateway = &f
		}
		return s
	}
	otherBundle := func(s matrixSpec) matrixSpec {
		f := *s.tls.Gateway
		f.CADigest = "another bundle"
		s.tls.Gateway = &f
		return s
	}
	cases := []gatewayCase{
		// JetStream on either side holds this change with OwnMetaGroup
		// (TestJoiningWithAMetaGroupOfItsOwn); without it, it splits.
		{"add the gateway, no JetStream", one(ChangeGateway), east(noJetStream), east(noJetStream, rendertest.Gateway(toWest)), west(noJetStream, rendertest.Gateway(toEast))},
		{"remove the gateway", one(ChangeGateway), east(rendertest.Gateway(toWest)), east(), superWest},
		{"a remote by URLs instead of clusterRef", one(ChangeGatewayRemotes), east(rendertest.Gateway(toWest)), east(rendertest.Gateway(westByURLs)), superWest},
		{"a remote removed", one(ChangeGatewayRemotes), east(rendertest.Gateway(toWest)), east(rendertest.Gateway()), superWest},
		{"a remote added", one(ChangeGatewayRemotes), east(rendertest.Gateway()), east(rendertest.Gateway(toWest)), superWest},
		{"reject unknown clusters", one(ChangeGatewayRemotes), east(rendertest.Gateway(toWest)), east(gateway(reject, toWest)), superWest},
		{"advertise an address", one(ChangeGatewayRemotes), east(rendertest.Gateway(toWest)), east(gateway(advertise, toWest)), superWest},
		{"turn gateway TLS on", one(ChangeGatewayTLS), withTLS(east(rendertest.Gateway(toWest)), false), withTLS(east(rendertest.Gateway(toWest)), true),
			withTLS(west(rendertest.Gateway(toEast)), false)},
		{"turn gateway TLS off", one(ChangeGatewayTLS), withTLS(east(rendertest.Gateway(toWest)), true), withTLS(east(rendertest.Gateway(toWest)), false),
			withTLS(west(rendertest.Gateway(toEast)), true)},
		{"another gateway CA bundle", one(ChangeGatewayCA), withTLS(east(rendertest.Gateway(toWest)), true), otherBundle(withTLS(east(rendertest.Gateway(toWest)), true)),
			withTLS(west(rendertest.Gateway(toEast)), true)},
	}
	// Every case again with all six servers on the older patch release.
	for _, c := range slices.Clone(cases) {
		cases = append(cases, gatewayCase{c.name + " (" + olderPatchRelease + ")", c.kinds,
			onVersion(olderPatchRelease, c.old), onVersion(olderPatchRelease, c.new), onVersion(olderPatchRelease, c.west)})
	}
	return append(cases, gatewayCase{"patch version up, in a supercluster", one(ChangeVersion),
		east(rendertest.Version(olderPatchRelease), rendertest.Gateway(toWest)), east(rendertest.Version("2.15.2"), rendertest.Gateway(toWest)), superWest})
}

// TestGatewayMatrixCases checks the cases without starting a server: each
// renders and Classify finds exactly its kinds.
func TestGatewayMatrixCases(t *testing.T) {
	for _, c := range gatewayCases() {
		if got := classifyRendered(t, c.old.render(t), c.new.render(t)); !slices.Equal(got, c.kinds) {
			t.Errorf("%s: Classify(old, new) = %v, want exactly %v", c.name, got, c.kinds)
		}
	}
}

// superclusterPlaces renders the three specs of a case and places east's
// and west's servers on this machine, with the route and gateway host maps
// both sides' configs need.
type superclusterPlaces struct {
	east, west       []rendertest.Local
	routes           map[string]rendertest.Local
	gateways         map[string][]rendertest.Local
	eastOld, eastNew *render.Output
	westOut          *render.Output
}

func placeSupercluster(t *testing.T, old, new, west matrixSpec) superclusterPlaces {
	t.Helper()
	p := superclusterPlaces{eastOld: old.render(t), eastNew: new.render(t), westOut: west.render(t)}
	var westRoutes map[string]rendertest.Local
	p.east, p.routes = rendertest.LocalAddresses(t, p.eastOld, "east", "east")
	p.west, westRoutes = rendertest.LocalAddresses(t, p.westOut, "west", "west")
	p.gateways = map[string][]rendertest.Local{}
	for host, l := range westRoutes {
		p.routes[host] = l
		p.gateways[host] = []rendertest.Local{l}
	}
	for host, l := range p.routes {
		if strings.HasSuffix(host, ".east.svc") {
			p.gateways[host] = []rendertest.Local{l}
		}
	}
	p.gateways[render.HeadlessServiceName("east")+".east.svc"] = p.east
	p.gateways[render.HeadlessServiceName("west")+".west.svc"] = p.west
	return p
}

func (p superclusterPlaces) runs(t *testing.T, out *render.Output, version string, bins map[string]string, locals []rendertest.Local) []serverRun {
	t.Helper()
	bin, ok := bins[version]
	if !ok {
		t.Fatalf("no nats-server binary for version %s", version)
	}
	runs := make([]serverRun, len(out.Servers))
	all := slices.Concat(p.east, p.west)
	for i, s := range out.Servers {
		writeSuperclusterTLS(t, all, locals[i].Dir)
		cfg, err := rendertest.LocalizeSuperclusterConfig(s.Config, locals[i], p.routes, p.gateways)
		if err != nil {
			t.Fatalf("localizing %s: %v", s.Name, err)
		}
		runs[i] = serverRun{Name: s.Name, Binary: bin, Config: cfg, JetStream: s.Facts.JetStream}
	}
	return runs
}

// matrixGatewayFiles are the gateway TLS files a case renders with: the
// routes' certificate and a CA bundle, written by writeSuperclusterTLS.
var matrixGatewayFiles = &render.TLSFiles{Secret: "demo-tls", CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt", Digest: "matrix", CADigest: "matrix", Verify: true}

// writeSuperclusterTLS writes the matrix CA and a certificate of it for
// every local address of both clusters (the localized configs dial
// addresses, so the certificate has their IPs) as the routes' files
// (writeMatrixTLS) and again as the gateway's, under dir/config.
func writeSuperclusterTLS(t *testing.T, all []rendertest.Local, dir string) {
	t.Helper()
	writeMatrixTLS(t, all, dir)
	for path, b := range matrixRouteFiles(t, all, dir) {
		to := filepath.Join(dir, "config", render.GatewayTLSDir, filepath.Base(path))
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGatewayMatrix runs every case of gatewayCases on real servers.
func TestGatewayMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	bins := map[string]string{"2.15.1": natsBinary(t, "2.15.1"), "2.15.2": natsBinary(t, "2.15.2")}
	cases := gatewayCases()
	var mu sync.Mutex
	rows := map[string]gatewayRow{}
	t.Run("changes", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				p := placeSupercluster(t, c.old, c.new, c.west)
				if got := classifyRendered(t, p.eastOld, p.eastNew); !slices.Equal(got, c.kinds) {
					t.Fatalf("Classify(old, new) = %v, want exactly %v", got, c.kinds)
				}
				row := runGatewayRow(t, p,
					p.runs(t, p.eastOld, c.old.cluster.Spec.Version, bins, p.east),
					p.runs(t, p.eastNew, c.new.cluster.Spec.Version, bins, p.east),
					p.runs(t, p.westOut, c.west.cluster.Spec.Version, bins, p.west))
				mu.Lock()
				rows[c.name] = row
				mu.Unlock()
			})
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-48s | %-15s | %-13s | %-13s | %-7s | %-11s | %-8s | %-20s | %s\n", "change of east", "kind", "2 old + 1 new", "1 old + 2 new", "all new", "stream kept", "SIGHUP", "found", "planner")
	fmt.Fprintf(&b, "%s\n", strings.Repeat("-", 160))
	for _, c := range cases {
		row, ok := rows[c.name]
		if !ok {
			continue
		}
		for _, k := range c.kinds {
			e := EffectOf(k)
			fmt.Fprintf(&b, "%-48s | %-15s | %-13s | %-13s | %-7s | %-11s | %-8s | %-20s | %s\n", c.name, k,
				row.phases[0], row.phases[1], row.phases[2], row.streamKeptString(), row.reloadString(), classification(row.splits, row.resets), classification(e.Splits, e.ResetsJetStream))
			if row.reloadTried && (e.Reloads || e.ReloadsWithoutAuth) != row.reloaded {
				t.Errorf("%s (%s): the planner says it reloads: %t; nats-server accepted the reload: %t (%s)", c.name, k, e.Reloads || e.ReloadsWithoutAuth, row.reloaded, row.reloadError)
			}
			if e.Splits != row.splits || e.ResetsJetStream != row.resets {
				t.Errorf("%s (%s): the planner classifies it %s, real servers %s", c.name, k, classification(e.Splits, e.ResetsJetStream), classification(row.splits, row.resets))
			}
		}
	}
	b.WriteString("(each stage: R = each cluster's servers route to each other, G = every server has an outbound gateway to the other cluster, " +
		"M = one meta leader across both clusters with every member current, W = the stream in west takes writes through every server of east; - = failed, . = not applicable)\n")
	t.Log(b.String())
	if out := os.Getenv("GATEWAY_MATRIX_OUT"); out != "" {
		_ = os.WriteFile(out, []byte(b.String()), 0o644)
	}
}

// gatewayRow is what one case did.
type gatewayRow struct {
	phases                    [3]gatewayStage
	streamApplies, streamKept bool
	splits, resets            bool
	// reloadTried: a reload of the new config was sent first; reloaded
	// says nats-server accepted it, reloadError what it said otherwise.
	reloadTried, reloaded bool
	reloadError           string
}

func (r gatewayRow) reloadString() string {
	switch {
	case !r.reloadTried:
		return "n/a"
	case r.reloaded:
		return "reloads"
	}
	return "refused"
}

func (r gatewayRow) streamKeptString() string {
	return matrixRow{streamApplies: r.streamApplies, streamKept: r.streamKept}.streamKeptString()
}

// gatewayStage is one observation of the supercluster.
type gatewayStage struct {
	routes, gateways, meta, writable bool
	streamApplies                    bool
	detail                           string
}

func (s gatewayStage) ok() bool {
	return s.routes && s.gateways && s.meta && (!s.streamApplies || s.writable)
}

func (s gatewayStage) String() string {
	mark := func(b bool, c string) string {
		if b {
			return c
		}
		return "-"
	}
	w := "."
	if s.streamApplies {
		w = mark(s.writable, "W")
	}
	return mark(s.routes, "R") + mark(s.gateways, "G") + mark(s.meta, "M") + w
}

// runGatewayRow starts west and east on their old spec, writes the stream
// in west, and moves east to its new spec one server at a time.
func runGatewayRow(t *testing.T, p superclusterPlaces, old, new, westRuns []serverRun) gatewayRow {
	east := make([]*natsServer, len(p.east))
	west := make([]*natsServer, len(p.west))
	for i, l := range p.east {
		east[i] = &natsServer{local: l}
	}
	for i, l := range p.west {
		west[i] = &natsServer{local: l}
	}
	t.Cleanup(func() {
		for _, s := range slices.Concat(east, west) {
			s.stop()
		}
	})
	for i, s := range west {
		s.start(t, westRuns[i])
	}
	for i, s := range east {
		s.start(t, old[i])
	}
	jetStream := westRuns[0].JetStream && old[0].JetStream
	// Without the gateway on east's old spec the two clusters start apart.
	together := strings.Contains(string(old[0].Config), `"gateway"`)
	first := observeSupercluster(east, west, together, false, nil, 60*time.Second)
	if !first.ok() {
		t.Fatalf("the clusters on the old spec did not form: %s (%s)", first, first.detail)
	}
	acked := 0
	if jetStream {
		acked = createWestStream(t, west[0])
	}
	row := gatewayRow{streamApplies: jetStream}
	// First a reload: the new config written over east-2's and a SIGHUP.
	// A version change is a new binary and never reloads.
	if old[2].Binary == new[2].Binary {
		row.reloadTried = true
		row.reloaded, row.reloadError, _ = east[2].reload(t, new[2], 10*time.Second)
		t.Logf("reload of %s: accepted=%t %s", east[2].name(), row.reloaded, row.reloadError)
	}
	for i, idx := range []int{2, 1, 0} {
		east[idx].stop()
		east[idx].start(t, new[idx])
		row.phases[i] = observeSupercluster(east, west, true, jetStream, &acked, 20*time.Second)
		t.Logf("stage %d: %s %s", i, row.phases[i], row.phases[i].detail)
	}
	if jetStream {
		row.streamKept = streamHas(west[0], westStream, acked)
	}
	row.splits = !row.phases[0].ok() || !row.phases[1].ok()
	row.resets = jetStream && !row.streamKept
	return row
}

// observeSupercluster polls until every check passes or the wait runs out.
// together: the clusters are expected joined (else each on its own).
func observeSupercluster(east, west []*natsServer, together, withStream bool, acked *int, wait time.Duration) gatewayStage {
	deadline := time.Now().Add(wait)
	for {
		st := gatewayStage{streamApplies: withStream}
		var details []string
		st.routes = true
		for _, cl := range [][]*natsServer{east, west} {
			for _, s := range cl {
				to := s.routedTo()
				for _, o := range cl {
					if o != s && !to[o.name()] {
						st.routes = false
						details = append(details, s.name()+" has no route to "+o.name())
					}
				}
			}
		}
		st.gateways = true
		if together {
			for _, side := range []struct {
				servers []*natsServer
				other   string
			}{{east, "west"}, {west, "east"}} {
				for _, s := range side.servers {
					if !s.gatewayTo(side.other) {
						st.gateways = false
						details = append(details, s.name()+" has no outbound gateway to "+side.other)
					}
				}
			}
		}
		var d string
		if together {
			st.meta, d = metaWhole(slices.Concat(east, west))
		} else {
			st.meta, d = metaWhole(east)
			if st.meta {
				st.meta, d = metaWhole(west)
			}
		}
		if d != "" {
			details = append(details, d)
		}
		if withStream && st.routes && st.gateways && st.meta {
			st.writable, d = westStreamWritable(east, acked)
			if d != "" {
				details = append(details, d)
			}
		}
		st.detail = strings.Join(details, "; ")
		if st.ok() || time.Now().After(deadline) {
			if withStream && !st.writable {
				st.writable, _ = westStreamWritable(east, acked)
			}
			return st
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// gatewayTo: the server has a connected outbound gateway to the cluster.
func (s *natsServer) gatewayTo(cluster string) bool {
	b, err := s.get("/gatewayz")
	if err != nil {
		return false
	}
	var gz struct {
		Outbound map[string]struct {
			Connection *struct {
				Name string `json:"name"`
			} `json:"connection"`
		} `json:"outbound_gateways"`
	}
	if json.Unmarshal(b, &gz) != nil {
		return false
	}
	g, ok := gz.Outbound[cluster]
	return ok && g.Connection != nil
}

// createWestStream makes the R3 stream placed in west through a server of
// west and writes 10 messages.
func createWestStream(t *testing.T, s *natsServer) int {
	t.Helper()
	return createStreamWith(t, s, &nats.StreamConfig{Name: westStream, Subjects: []string{"west.orders.>"}, Replicas: 3,
		Storage: nats.FileStorage, Placement: &nats.Placement{Cluster: "west"}}, "west.orders.new")
}

// westStreamWritable: the stream in west takes a write through every
// server of east, and its replicas, in west, are current.
func westStreamWritable(east []*natsServer, acked *int) (bool, string) {
	return streamWritableIn(east, acked, westStream, "west.orders.new", "west")
}

// TestJoiningWithAMetaGroupOfItsOwn is why the planner holds the gateway
// added to a cluster with JetStream (OwnMetaGroup) rather than letting
// restart-all complete it: east runs JetStream with a stream of its own,
// west (a cluster with a gateway that names no remote) has its own too, and east's
// servers are restarted together with the gateway, the best restart-all
// could do. The test records what the supercluster then does with the two
// meta groups and the two streams, and fails if it kept one meta group
// that knows both streams through a later rolling restart of east. On
// nats-server 2.15.2 every server follows west's meta leader and the meta
// group lists only west's stream: east's keeps running on its own Raft
// group, unknown to JetStream's API (not listed, not managed).
//
// The case "a remote joining two meta groups" is why the planner holds a
// gateway remote added between two clusters that each run a meta group of
// their own (rollout.joiningMetaGroups): east already has a gateway that
// names no remote, so a meta group of its own, and gains the remote west,
// rolled one server at a time (ChangeGatewayRemotes).
func TestJoiningWithAMetaGroupOfItsOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	base := []rendertest.ClusterOption{rendertest.JetStreamLimits("256Mi", "1Gi")}
	toWest := rendertest.GatewayTo("west", "west")
	for _, c := range []struct {
		name     string
		old      []rendertest.ClusterOption
		kind     ChangeKind
		together bool
	}{
		{"the gateway added, servers restarted together", nil, ChangeGateway, true},
		{"a remote joining two meta groups, one server at a time", []rendertest.ClusterOption{rendertest.Gateway()}, ChangeGatewayRemotes, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			eastOld := matrixSpec{cluster: rendertest.NewCluster("east", "east", slices.Concat(base, c.old)...)}
			eastNew := matrixSpec{cluster: rendertest.NewCluster("east", "east", append(slices.Clone(base), rendertest.Gateway(toWest))...)}
			joinMetaGroups(t, base, eastOld, eastNew, c.kind, c.together)
		})
	}
}

// joinMetaGroups runs one case of TestJoiningWithAMetaGroupOfItsOwn: east
// moves from eastOld to eastNew (kind), its servers restarted together or
// one at a time from the highest ordinal.
func joinMetaGroups(t *testing.T, base []rendertest.ClusterOption, eastOld, eastNew matrixSpec, kind ChangeKind, together bool) {
	bins := map[string]string{"2.15.2": natsBinary(t, "2.15.2")}
	// west's gateway names no remote: a server whose gateway lists a
	// remote it cannot reach forms no meta group (nats-server waits for
	// the supercluster's peers before it bootstraps one), and east has
	// no gateway yet.
	westSpec := matrixSpec{cluster: rendertest.NewCluster("west", "west", append(base, rendertest.Gateway())...)}
	p := placeSupercluster(t, eastOld, eastNew, westSpec)
	if got := classifyRendered(t, p.eastOld, p.eastNew); !slices.Equal(got, []ChangeKind{kind}) {
		t.Fatalf("Classify(old, new) = %v, want exactly [%s]", got, kind)
	}
	old := p.runs(t, p.eastOld, "2.15.2", bins, p.east)
	new := p.runs(t, p.eastNew, "2.15.2", bins, p.east)
	westRuns := p.runs(t, p.westOut, "2.15.2", bins, p.west)
	east := make([]*natsServer, 3)
	west := make([]*natsServer, 3)
	for i := range 3 {
		east[i], west[i] = &natsServer{local: p.east[i]}, &natsServer{local: p.west[i]}
	}
	t.Cleanup(func() {
		for _, s := range slices.Concat(east, west) {
			s.stop()
		}
	})
	for i := range 3 {
		west[i].start(t, westRuns[i])
		east[i].start(t, old[i])
	}
	if st := observeSupercluster(east, west, false, false, nil, 60*time.Second); !st.ok() {
		t.Fatalf("the two clusters did not form apart: %s (%s)", st, st.detail)
	}
	eastAcked := createStream(t, east[0])
	westAcked := createWestStream(t, west[0])
	eastLeader, _ := east[0].meta()
	westLeader, _ := west[0].meta()
	t.Logf("before: east's meta leader %s, west's %s", eastLeader.Leader, westLeader.Leader)

	if together {
		for _, s := range east {
			s.stop()
		}
		for i, s := range east {
			s.start(t, new[i])
		}
	} else {
		for i := 2; i >= 0; i-- {
			east[i].stop()
			east[i].start(t, new[i])
			st := observeSupercluster(east, west, true, false, nil, 20*time.Second)
			t.Logf("after rolling %s onto the remote: %s (%s)", east[i].name(), st, st.detail)
		}
	}
	joined := observeSupercluster(east, west, true, false, nil, 30*time.Second)
	leaders := map[string]bool{}
	for _, s := range slices.Concat(east, west) {
		if m, ok := s.meta(); ok {
			leaders[m.Leader] = true
		}
	}
	eastKept := streamHas(east[0], streamName, eastAcked)
	westKept := streamHas(west[0], westStream, westAcked)
	westFromEast := streamHas(east[0], westStream, westAcked)
	eastFromWest := streamHas(west[0], streamName, eastAcked)
	listed := streamNames(east[0])
	t.Logf("after the join: %s (%s); meta leaders named %v; %s through east: %t, through west: %t; %s through west: %t, through east: %t; the meta group lists %v",
		joined, joined.detail, slices.Sorted(maps.Keys(leaders)), streamName, eastKept, eastFromWest, westStream, westKept, westFromEast, listed)

	// A later rolling restart of east (any version change): each server
	// catches up from the supercluster's meta leader.
	for i := 2; i >= 0; i-- {
		east[i].stop()
		east[i].start(t, new[i])
		if st := observeSupercluster(east, west, true, false, nil, 30*time.Second); !st.ok() {
			t.Logf("after restarting %s: %s (%s)", east[i].name(), st, st.detail)
		}
	}
	eastAfter, westAfter := streamHas(east[0], streamName, eastAcked), streamHas(west[0], westStream, westAcked)
	listedAfter := streamNames(west[0])
	t.Logf("after a rolling restart of east: %s kept: %t, %s kept: %t; the meta group lists %v", streamName, eastAfter, westStream, westAfter, listedAfter)
	whole := joined.ok() && eastKept && westKept && westFromEast && eastFromWest && eastAfter && westAfter &&
		slices.Contains(listed, streamName) && slices.Contains(listed, westStream) &&
		slices.Contains(listedAfter, streamName) && slices.Contains(listedAfter, westStream)
	if whole {
		t.Errorf("a cluster with a meta group of its own joined the supercluster (%s) and kept one meta group that knows both streams, through a rolling restart: "+
			"nats-server may now merge meta groups, and the OwnMetaGroup holds (rollout.ownMetaGroup, rollout.joiningMetaGroups) should be measured again", kind)
	}
}

// streamNames are the streams the meta group lists ($JS.API.STREAM.NAMES,
// answered by the meta leader), asked through the server; nil when it
// does not answer.
func streamNames(s *natsServer) []string {
	nc, js, err := connect(s)
	if err != nil {
		return nil
	}
	defer nc.Close()
	var names []string
	for n := range js.StreamNames() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// streamHas: the stream answers through the server with at least n
// messages (polled for up to 10 s).
func streamHas(s *natsServer, stream string, n int) bool {
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, js, err := connect(s)
		if err == nil {
			info, err := js.StreamInfo(stream)
			nc.Close()
			if err == nil && info.State.Msgs >= uint64(n) {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
}
