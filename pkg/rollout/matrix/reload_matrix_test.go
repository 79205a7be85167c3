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
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	. "github.com/nats-operator/nats-operator/pkg/rollout"
)

// serverRevisions are the rendered servers' own revisions, by ordinal.
func serverRevisions(out *render.Output) []string {
	revs := make([]string, len(out.Servers))
	for i, s := range out.Servers {
		revs[i] = s.Revision
	}
	return revs
}

// TestConfigReloadMatrix establishes, with real nats-server processes, which
// changes a running server takes by a config reload, and asserts that the
// Reloads of the effects table in changes.go is exactly that.
//
// The cases are the route-compatibility matrix's (matrix_cases_test.go) and
// reloadOnlyCases. Three servers start on the old spec, rendered and
// localized as in the route matrix, and an R3 stream is written when the old
// config has JetStream. Then each server in turn, from the highest ordinal
// down, gets the new config written over its config file and a SIGHUP (what
// `nats-server --signal reload` sends). After each reload the test records:
//
//   - accepted: the server logged "Reloaded server configuration" and kept
//     running (or it logged "Failed to reload server configuration: <error>");
//   - revision and load time: /varz then reports the new revision
//     (server_metadata.config_revision, which /varz shows as
//     metadata.config_revision) and a new config_load_time;
//   - applied: every server runs what its config says, as far as the test can
//     see (runsItsConfig): /varz tags, the /jsz limits, without auth what
//     the controller's system user block does (systemUserOnce: /varz
//     auth_required, a client without credentials in $G, the system user in
//     $SYS answered by every server), and, for the cases
//     with their own trust (reloadOnlyCases), users of the preloaded
//     accounts connecting and which servers answer account lookups (only a
//     full resolver does);
//   - peers: for those cases, every server on a full resolver still fetches
//     an account it lacks from its peers (peerLookups), as it must after a
//     push it missed;
//   - settled: every server routes to every other, the JetStream meta group
//     has one leader with every member current, and the stream takes writes
//     through every server with its replicas current.
//
// A case reloads when every one of these holds after every server's reload,
// and a kind when every case of it does. A version change is a new binary,
// which no reload can bring: its cases are skipped and the table must say it
// does not reload. The digest column (/varz config_digest) is recorded, not
// required.
func TestConfigReloadMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	bins := map[string]string{"2.15.1": natsBinary(t, "2.15.1"), "2.15.2": natsBinary(t, "2.15.2")}
	tr := newMatrixTrust(t)
	var cases []reloadCase
	for _, c := range matrixCases(t, tr) {
		cases = append(cases, reloadCase{matrixCase: c, tr: tr})
	}
	cases = append(cases, reloadOnlyCases(t)...)

	var mu sync.Mutex
	rows := map[string]reloadRow{}
	t.Run("changes", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				if slices.Contains(c.kinds, ChangeVersion) {
					t.Skip("a version change is a new binary: it cannot be reloaded, only restarted")
				}
				if why := tlsNotReloaded(c.kinds); why != "" {
					t.Skip(why)
				}
				locals, routes, old, new := matrixServers(t, c.matrixCase)
				if got := classifyRendered(t, old, new); !slices.Equal(got, c.kinds) {
					t.Fatalf("Classify(old, new) = %v, want exactly %v", got, c.kinds)
				}
				if old.Revision == new.Revision {
					t.Fatalf("the old and new spec render the same revision %s", old.Revision)
				}
				row := runReloadRow(t, locals,
					serverRuns(t, c.old, old, bins, locals, routes, c.tr),
					serverRuns(t, c.new, new, bins, locals, routes, c.tr),
					serverRevisions(old), serverRevisions(new), c.probe)
				mu.Lock()
				rows[c.name] = row
				mu.Unlock()
			})
		}
	})

	const format = "%-44s | %-24s | %-8s | %-8s | %-9s | %-6s | %-7s | %-5s | %-11s | %-5s | %-7s | %-8s | %-4s | %s"
	t.Logf(format, "change", "kind", "accepted", "revision", "load time", "digest", "applied", "peers", "settled", "found", "planner", "w/o auth", "mem", "error")
	// verdict is every case of a kind; withoutAuth every case of it with no
	// auth on either side; memory every case of it with auth on both sides
	// and the memory resolver on the new side.
	verdict, withoutAuth, memory := map[ChangeKind]bool{}, map[ChangeKind]bool{}, map[ChangeKind]bool{}
	all := func(m map[ChangeKind]bool, k ChangeKind, v bool) {
		if prev, seen := m[k]; seen {
			v = prev && v
		}
		m[k] = v
	}
	for _, c := range cases {
		row, ok := rows[c.name]
		kinds := c.kinds
		if len(kinds) == 0 {
			kinds = []ChangeKind{noKind}
		}
		noAuth := c.old.trust == nil && c.new.trust == nil
		onMemory := c.old.trust != nil && c.new.trust != nil && c.new.cluster.Spec.Auth.Resolver == clusterv1beta1.ResolverMemory
		for _, k := range kinds {
			e := EffectOf(k)
			if why := tlsNotReloaded([]ChangeKind{k}); why != "" {
				t.Logf(format, c.name, k, "skipped", "", "", "", "", "", "", "no", yesNo(e.Reloads), yesNo(e.ReloadsWithoutAuth), yesNo(e.ReloadsWithMemoryResolver), why)
				verdict[k] = false
				if noAuth {
					withoutAuth[k] = false
				}
				continue
			}
			if k == ChangeVersion {
				t.Logf(format, c.name, k, "skipped", "", "", "", "", "", "", "no", yesNo(e.Reloads), yesNo(e.ReloadsWithoutAuth), yesNo(e.ReloadsWithMemoryResolver), "a new binary, never a reload")
				verdict[k] = false
				if noAuth {
					withoutAuth[k] = false
				}
				continue
			}
			if !ok {
				continue
			}
			note := row.firstError()
			if note == "" && c.probe.sysCreds == "" && slices.Contains(c.kinds, ChangeResolver) {
				note = "(account lookups not asked: no system credentials)"
			}
			t.Logf(format, c.name, k,
				row.marks(func(s reloadStep) bool { return s.accepted }),
				row.marks(func(s reloadStep) bool { return s.revisionReported }),
				row.marks(func(s reloadStep) bool { return s.loadTimeChanged }),
				row.marks(func(s reloadStep) bool { return s.digestChanged }),
				row.marks(func(s reloadStep) bool { return s.applied }),
				row.peers(),
				row.stages(), yesNo(row.reloads()), plannerSays(k, e.Reloads), plannerSays(k, e.ReloadsWithoutAuth), plannerSays(k, e.ReloadsWithMemoryResolver), note)
			if k == noKind {
				if !row.reloads() {
					t.Errorf("%s: a difference that is no fact does not reload", c.name)
				}
				continue
			}
			all(verdict, k, row.reloads())
			if noAuth {
				all(withoutAuth, k, row.reloads())
			}
			if onMemory {
				all(memory, k, row.reloads())
			}
		}
	}
	t.Log("(per server, in the order reloaded: 2, 1, 0; y = yes, - = no. revision: /varz metadata.config_revision is the new revision; " +
		"load time: /varz config_load_time changed; digest: /varz config_digest changed; applied: every server runs what its config says (tags, limits, preloaded accounts, resolver, without auth the system user block); " +
		"peers: every server on a full resolver lets in a user of an account only a peer holds (. not asked); " +
		"settled: R routes, M meta group, W stream writable, . not applicable. A kind reloads when every case of it does; " +
		"w/o auth: the planner's ReloadsWithoutAuth, which every case of the kind with no auth on either side must bear out, with the system user or without; mem: the planner's ReloadsWithMemoryResolver, which every case of the kind in operator mode with the memory resolver on the new side must bear out)")
	for _, k := range ChangeKinds() {
		want, measured := verdict[k]
		if !measured {
			continue
		}
		if got := EffectOf(k).Reloads; got != want {
			t.Errorf("%s: the planner says Reloads=%t, real servers %t", k, got, want)
			if want && fullResolverDefect[k] {
				t.Errorf("%s now reloads with a full or cache resolver too: the nats-server release fixed the full-resolver reload defect (reloadAuthorization installs the resolver without starting it); revisit ReloadsWithMemoryResolver and the README's advice to use the Memory resolver", k)
			}
		}
		// A kind no case on the memory resolver has does not reload there.
		if got, want := EffectOf(k).ReloadsWithMemoryResolver, memory[k]; got != want {
			t.Errorf("%s: the planner says ReloadsWithMemoryResolver=%t, real servers in operator mode on the memory resolver %t", k, got, want)
		}
		// A kind no case without auth has does not reload without auth.
		if got, want := EffectOf(k).ReloadsWithoutAuth, withoutAuth[k]; got != want {
			t.Errorf("%s: the planner says ReloadsWithoutAuth=%t, real servers without auth %t", k, got, want)
		}
	}
}

// reloadCase is a case of the reload matrix: a change and the trust its specs
// were rendered with.
type reloadCase struct {
	matrixCase
	// tr gives the creds clients connect with (appCreds).
	tr *matrixTrust
	// probe is what runsItsConfig may use beyond the monitoring endpoints.
	probe reloadProbe
}

// reloadProbe is the credentials runsItsConfig asks the servers with. The
// route matrix's trust keeps no system user and only app's creds, so its
// cases go without; reloadOnlyCases have them.
type reloadProbe struct {
	// sysCreds is a system account user's creds file: with it, the test asks
	// which servers answer account lookups.
	sysCreds string
	// accountCreds maps an account's public key to a creds file of a user of
	// it: a user of every account a server's config preloads must connect
	// through that server.
	accountCreds map[string]string
	// fixture issues the accounts of peerLookups, dir holds their creds;
	// nil: the test does not ask.
	fixture *rendertest.Fixture
	dir     string
}

// reloadOnlyCases are changes the route matrix covers in one direction only,
// or without what the reload matrix needs to see them applied: one
// JetStream limit raised with the other lowered is lowered (a restart); a
// tag removed is another diff than a tag added; a resolver change is seen only through
// account lookups, which take system credentials; an account added, only by
// a user of it connecting; and whether a server still fetches accounts from
// its peers after a reload (peerLookups) takes accounts the test issues, so
// the kinds that reload without auth have a case with auth too.
func reloadOnlyCases(t testing.TB) []reloadCase {
	t.Helper()
	spec := func(opts ...rendertest.ClusterOption) matrixSpec {
		base := []rendertest.ClusterOption{rendertest.JetStreamLimits("256Mi", "1Gi")}
		return matrixSpec{cluster: rendertest.NewCluster(matrixNamespace, "demo", slices.Concat(base, opts)...)}
	}
	one := func(k ChangeKind) []ChangeKind { return []ChangeKind{k} }

	f := rendertest.NewTrust(t, rendertest.WithAccounts("app", "app2"))
	dir := t.TempDir()
	writeCreds := func(name string, creds []byte) string {
		p := filepath.Join(dir, name+".creds")
		if err := os.WriteFile(p, creds, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	probe := reloadProbe{sysCreds: writeCreds("sys", f.System.UserCreds(t, "sys-user")), accountCreds: map[string]string{}, fixture: f, dir: dir}
	for _, a := range f.Accounts {
		probe.accountCreds[a.PublicKey] = writeCreds(a.Name, a.UserCreds(t, a.Name+"-user"))
	}
	authed := func(accounts []*rendertest.Account, opts ...rendertest.ClusterOption) matrixSpec {
		tr := &render.Trust{OperatorJWT: f.OperatorJWT, SystemAccountJWT: f.System.JWT}
		var names []string
		for _, a := range accounts {
			tr.Accounts = append(tr.Accounts, render.AccountTrust{Name: a.Name, PublicKey: a.PublicKey, JWT: a.JWT})
			names = append(names, a.Name)
		}
		s := spec(append([]rendertest.ClusterOption{rendertest.Auth("trust", names...)}, opts...)...)
		s.trust = tr
		return s
	}
	app, both := f.Accounts[:1], f.Accounts
	reissued := []*rendertest.Account{f.Reissued(t, f.Accounts[0], "reissued")}
	noAuth, withApp := &matrixTrust{}, &matrixTrust{appCreds: probe.accountCreds[f.Accounts[0].PublicKey]}
	sys := func(s matrixSpec) matrixSpec { s.systemUser = rendertest.SystemUser(); return s }
	routeTLS, clientTLS, rotatedRoutes, rotatedClient := tlsSpecs()
	full := rendertest.Resolver(clusterv1beta1.ResolverFull)
	cache := rendertest.Resolver(clusterv1beta1.ResolverCache)
	mem := rendertest.Resolver(clusterv1beta1.ResolverMemory)
	cases := []reloadCase{
		// The memory resolver: every day-2 kind that reloads without auth,
		// and accounts added and removed, in operator mode.
		{matrixCase{"other server tags, memory resolver", one(ChangeServerTags), authed(app, mem), authed(app, mem, rendertest.ServerTag("region", "east"))}, withApp, probe},
		{matrixCase{"raise JetStream limits, memory resolver", one(ChangeJetStreamLimitsRaised), authed(app, mem), authed(app, mem, rendertest.JetStreamLimits("512Mi", "2Gi"))}, withApp, probe},
		{matrixCase{"lower JetStream limits, memory resolver", one(ChangeJetStreamLimitsLowered), authed(app, mem, rendertest.JetStreamLimits("512Mi", "2Gi")), authed(app, mem)}, withApp, probe},
		{matrixCase{"add an account trust, memory resolver", one(ChangeAccounts), authed(app, mem), authed(both, mem)}, withApp, probe},
		{matrixCase{"remove an account trust, memory resolver", one(ChangeAccounts), authed(both, mem), authed(app, mem)}, withApp, probe},
		{matrixCase{"an account's claims changed, memory resolver", one(ChangeAccounts), authed(app, mem), authed(reissued, mem)}, withApp, probe},
		{matrixCase{"full to memory resolver, looked up", one(ChangeResolver), authed(app, full), authed(app, mem)}, withApp, probe},
		{matrixCase{"memory to full resolver, looked up", one(ChangeResolver), authed(app, mem), authed(app, full)}, withApp, probe},
		{matrixCase{"new route certificate, memory resolver", one(ChangeRouteCertificate), routeTLS(authed(app, mem)), rotatedRoutes(routeTLS(authed(app, mem)))}, withApp, probe},
		{matrixCase{"new client certificate, memory resolver", one(ChangeClientCertificate), clientTLS(authed(app, mem)), rotatedClient(clientTLS(authed(app, mem)))}, withApp, probe},

		{matrixCase{"raise one JetStream limit, lower the other", one(ChangeJetStreamLimitsLowered), spec(), spec(rendertest.JetStreamLimits("512Mi", "512Mi"))}, noAuth, reloadProbe{}},
		{matrixCase{"remove server tags", one(ChangeServerTags), spec(rendertest.ServerTag("region", "east")), spec()}, noAuth, reloadProbe{}},
		{matrixCase{"full to cache resolver, looked up", one(ChangeResolver), authed(app, full), authed(app, cache)}, withApp, probe},
		{matrixCase{"cache to full resolver, looked up", one(ChangeResolver), authed(app, cache), authed(app, full)}, withApp, probe},
		{matrixCase{"add an account trust, connected", one(ChangeAccounts), authed(app), authed(both)}, withApp, probe},
		{matrixCase{"an account's claims changed, full resolver", one(ChangeAccounts), authed(app), authed(reissued)}, withApp, probe},
		{matrixCase{"other server tags, with auth", one(ChangeServerTags), authed(app), authed(app, rendertest.ServerTag("region", "east"))}, withApp, probe},
		{matrixCase{"raise JetStream limits, with auth", one(ChangeJetStreamLimitsRaised), authed(app), authed(app, rendertest.JetStreamLimits("512Mi", "2Gi"))}, withApp, probe},
		{matrixCase{"lower JetStream limits, with auth", one(ChangeJetStreamLimitsLowered), authed(app, rendertest.JetStreamLimits("512Mi", "2Gi")), authed(app)}, withApp, probe},
		{matrixCase{"other server tags, with the system user", one(ChangeServerTags), sys(spec()), sys(spec(rendertest.ServerTag("region", "east")))}, noAuth, reloadProbe{}},
		{matrixCase{"remove server tags, with the system user", one(ChangeServerTags), sys(spec(rendertest.ServerTag("region", "east"))), sys(spec())}, noAuth, reloadProbe{}},
		{matrixCase{"raise JetStream limits, with the system user", one(ChangeJetStreamLimitsRaised), sys(spec()), sys(spec(rendertest.JetStreamLimits("512Mi", "2Gi")))}, noAuth, reloadProbe{}},
		{matrixCase{"new route certificate, with auth", one(ChangeRouteCertificate), routeTLS(authed(app)), rotatedRoutes(routeTLS(authed(app)))}, withApp, probe},
		{matrixCase{"new client certificate, with auth", one(ChangeClientCertificate), clientTLS(authed(app)), rotatedClient(clientTLS(authed(app)))}, withApp, probe},
		{matrixCase{"new route certificate, with the system user", one(ChangeRouteCertificate), routeTLS(sys(spec())), rotatedRoutes(routeTLS(sys(spec())))}, noAuth, reloadProbe{}},
		// MQTT's delivery settings in operator mode: on a full resolver
		// every reload breaks the account resolver; on the memory one not.
		{matrixCase{"another MQTT ack wait, with auth", one(ChangeMQTTDelivery), authed(app, mqttListener(0)), authed(app, mqttListener(time.Minute))}, withApp, probe},
		{matrixCase{"another MQTT ack wait, memory resolver", one(ChangeMQTTDelivery), authed(app, mem, mqttListener(0)), authed(app, mem, mqttListener(time.Minute))}, withApp, probe},
	}
	leaf := matrixCase{"a leaf remote added, with auth", one(ChangeLeafnodeRemotes), authed(app), authed(app, rendertest.LeafNodes(false,
		clusterv1beta1.LeafNodeRemote{Name: "hub", URLs: []string{"nats://127.0.0.1:1"}, Account: app[0].PublicKey}))}
	for _, c := range onBothPatchReleases([]matrixCase{leaf}) {
		cases = append(cases, reloadCase{c, withApp, probe})
	}
	return cases
}

// tlsNotReloaded says why turning route or client TLS on or off is not a
// reload, measured by TestTLSRouteReload and TestTLSClientReload
// (tls_matrix_test.go): nats-server accepts the reload, but established
// routes and client connections keep the TLS they were made with until
// they reconnect, which this matrix cannot see (/routez shows no TLS); ""
// for other kinds.
func tlsNotReloaded(kinds []ChangeKind) string {
	for _, k := range kinds {
		switch k {
		case ChangeRouteTLS:
			return "route TLS on or off: a reload is accepted, but established routes keep their TLS until they reconnect (TestTLSRouteReload)"
		case ChangeClientTLS:
			return "client TLS on or off: a reload is accepted, but established clients keep their connection as it was (TestTLSClientReload)"
		case ChangeRouteCA:
			return "another route CA: a reload is accepted and keeps established routes, hiding the split until a route reconnects (TestTLSRouteNewCAOneServerAtATime)"
		}
	}
	return ""
}

// plannerSays is yesNo of an effect, "." for a case of no kind.
// fullResolverDefect are the kinds that reload on the memory resolver but
// not on a full or cache one, only because nats-server 2.15 installs the
// reloaded full or cache resolver without starting it.
var fullResolverDefect = map[ChangeKind]bool{
	ChangeServerTags: true, ChangeJetStreamLimitsRaised: true, ChangeAccounts: true,
	ChangeRouteCertificate: true, ChangeClientCertificate: true,
}

func plannerSays(k ChangeKind, b bool) string {
	if k == noKind {
		return "."
	}
	return yesNo(b)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// reloadStep is what one server's reload did.
type reloadStep struct {
	// accepted: the server logged that it reloaded and kept running.
	accepted bool
	// err is what the server logged instead ("" when accepted).
	err string
	// notices are what the server logged it reloaded ("Reloaded: tags").
	notices []string
	// revisionReported: /varz metadata.config_revision is the new revision.
	revisionReported bool
	// loadTimeChanged and digestChanged: /varz config_load_time and
	// config_digest differ from before the reload.
	loadTimeChanged, digestChanged bool
	// applied: every server runs what its config says (runsItsConfig).
	applied bool
	// peersApply: the case can ask and two servers run a full resolver;
	// peersOK: every such server fetched an account only a peer held
	// (peerLookups).
	peersApply, peersOK bool
	// settled is the cluster after the reload.
	settled stage
}

type reloadRow struct {
	steps [3]reloadStep
}

// reloads: every server took its reload, reported it and runs it, and the
// cluster was settled after each.
func (r reloadRow) reloads() bool {
	for _, s := range r.steps {
		if !s.accepted || !s.revisionReported || !s.loadTimeChanged || !s.applied || (s.peersApply && !s.peersOK) || !s.settled.ok() {
			return false
		}
	}
	return true
}

func (r reloadRow) marks(f func(reloadStep) bool) string {
	var out []string
	for _, s := range r.steps {
		if f(s) {
			out = append(out, "y")
		} else {
			out = append(out, "-")
		}
	}
	return strings.Join(out, ",")
}

func (r reloadRow) peers() string {
	var out []string
	for _, s := range r.steps {
		switch {
		case !s.peersApply:
			out = append(out, ".")
		case s.peersOK:
			out = append(out, "y")
		default:
			out = append(out, "-")
		}
	}
	return strings.Join(out, ",")
}

func (r reloadRow) stages() string {
	var out []string
	for _, s := range r.steps {
		out = append(out, s.settled.String())
	}
	return strings.Join(out, ",")
}

// firstError is the first refusal a server logged, without the values
// nats-server prints after it (Go pointers and whole JWTs).
func (r reloadRow) firstError() string {
	for _, s := range r.steps {
		if s.err != "" {
			e, _, _ := strings.Cut(s.err, ": old=")
			return e
		}
	}
	return ""
}

// runReloadRow starts a server at every place on its old config, writes the
// stream (when the old config has JetStream), and reloads the servers onto
// their new config from the highest ordinal down, observing each stage.
func runReloadRow(t *testing.T, locals []rendertest.Local, old, new []serverRun, oldRev, newRev []string, probe reloadProbe) reloadRow {
	servers := make([]*natsServer, len(locals))
	for i, l := range locals {
		servers[i] = &natsServer{local: l}
	}
	t.Cleanup(func() {
		for _, s := range servers {
			s.stop()
		}
	})
	for i, s := range servers {
		s.start(t, old[i])
	}
	acked := 0
	first := observeStage(servers, false, &acked, 60*time.Second)
	if !first.ok() {
		t.Fatalf("the cluster on the old config did not form: %s (%s)", first, first.detail)
	}
	for i, s := range servers {
		if v, err := s.varz(); err != nil || v.Metadata["config_revision"] != oldRev[i] {
			t.Fatalf("%s reports revision %q (%v), want the old revision %s", s.name(), v.Metadata["config_revision"], err, oldRev[i])
		}
	}
	if ok, d := runsItsConfig(servers, probe, 5*time.Second); !ok {
		t.Fatalf("on the old config: %s", d)
	}
	if applies, ok, d := peerLookups(t, servers, probe, 5*time.Second); applies && !ok {
		t.Fatalf("on the old config: %s", d)
	}
	withStream := old[0].JetStream
	if withStream {
		acked = createStream(t, servers[0])
	}
	var row reloadRow
	for i, idx := range []int{2, 1, 0} {
		s := servers[idx]
		st := &row.steps[i]
		before, err := s.varz()
		if err != nil {
			t.Fatalf("reading /varz of %s: %v", s.name(), err)
		}
		st.accepted, st.err, st.notices = s.reload(t, new[idx], 10*time.Second)
		if st.accepted {
			s.running = new[idx]
		}
		if after, err := s.varz(); err == nil {
			st.revisionReported = after.Metadata["config_revision"] == newRev[idx]
			st.loadTimeChanged = !after.ConfigLoadTime.Equal(before.ConfigLoadTime)
			st.digestChanged = after.ConfigDigest != before.ConfigDigest
		}
		st.settled = observeStage(servers, withStream && anyJetStream(servers), &acked, 10*time.Second)
		var applied, peers string
		st.applied, applied = runsItsConfig(servers, probe, 3*time.Second)
		st.peersApply, st.peersOK, peers = peerLookups(t, servers, probe, 3*time.Second)
		t.Logf("reloaded server %d: accepted=%t %q revision=%t load_time=%t digest=%t applied=%t peers=%t/%t settled=%s %s %s %s %s",
			idx, st.accepted, st.notices, st.revisionReported, st.loadTimeChanged, st.digestChanged, st.applied, st.peersApply, st.peersOK,
			st.settled, st.err, applied, peers, st.settled.detail)
	}
	return row
}

func anyJetStream(servers []*natsServer) bool {
	return slices.ContainsFunc(servers, func(s *natsServer) bool { return s.running.JetStream })
}

// varzView is what the reload matrix reads of /varz.
type varzView struct {
	ConfigLoadTime time.Time `json:"config_load_time"`
	ConfigDigest   string    `json:"config_digest"`
	// Metadata is the config's server_metadata.
	Metadata map[string]string `json:"metadata"`
	Tags     []string          `json:"tags"`
	// AuthRequired is true with the system user block, without auth too.
	AuthRequired bool `json:"auth_required"`
}

func (s *natsServer) varz() (varzView, error) {
	var v varzView
	b, err := s.get("/varz")
	if err != nil {
		return v, err
	}
	return v, json.Unmarshal(b, &v)
}

// runningConfig is what runsItsConfig reads of a localized nats.conf.
type runningConfig struct {
	ServerTags    []string `json:"server_tags"`
	SystemAccount string   `json:"system_account"`
	JetStream     *struct {
		MaxMemoryStore int64 `json:"max_memory_store"`
		MaxFileStore   int64 `json:"max_file_store"`
	} `json:"jetstream"`
	Resolver *struct {
		Type string `json:"type"`
		Dir  string `json:"dir"`
	} `json:"resolver"`
	ResolverPreload map[string]string `json:"resolver_preload"`
}

// runsItsConfig polls until every server runs what its config (s.running)
// says, as far as the monitoring endpoints and the probe's credentials show:
// its /varz tags are the config's server_tags; its /jsz limits the config's
// JetStream limits; a user of every account it preloads (with creds in the
// probe) connects through it; and, with the probe's system creds, the servers
// that answer an account lookup are exactly those with a full resolver (a
// cache resolver does not answer). It returns the last result.
func runsItsConfig(servers []*natsServer, probe reloadProbe, wait time.Duration) (bool, string) {
	deadline := time.Now().Add(wait)
	for {
		ok, d := runsItsConfigOnce(servers, probe)
		if ok || time.Now().After(deadline) {
			return ok, d
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func runsItsConfigOnce(servers []*natsServer, probe reloadProbe) (bool, string) {
	full, sysAccount := 0, ""
	for _, s := range servers {
		var c runningConfig
		if err := json.Unmarshal(s.running.Config, &c); err != nil {
			return false, fmt.Sprintf("reading the config of %s: %v", s.name(), err)
		}
		v, err := s.varz()
		if err != nil {
			return false, fmt.Sprintf("reading /varz of %s: %v", s.name(), err)
		}
		if !slices.Equal(sortedCopy(v.Tags), sortedCopy(c.ServerTags)) {
			return false, fmt.Sprintf("%s runs tags %v, its config says %v", s.name(), v.Tags, c.ServerTags)
		}
		if c.JetStream != nil {
			mem, file, err := s.jetStreamLimits()
			if err != nil {
				return false, fmt.Sprintf("reading /jsz of %s: %v", s.name(), err)
			}
			if mem != c.JetStream.MaxMemoryStore || file != c.JetStream.MaxFileStore {
				return false, fmt.Sprintf("%s runs JetStream limits %d/%d, its config says %d/%d", s.name(), mem, file, c.JetStream.MaxMemoryStore, c.JetStream.MaxFileStore)
			}
		}
		var preloaded []string
		for key := range c.ResolverPreload {
			preloaded = append(preloaded, key)
		}
		for _, key := range sortedCopy(preloaded) {
			creds, ok := probe.accountCreds[key]
			if !ok {
				continue
			}
			nc, err := nats.Connect(s.url(), append(s.running.tlsOptions(), nats.Timeout(2*time.Second), nats.NoReconnect(), nats.IgnoreDiscoveredServers(), nats.UserCredentials(creds))...)
			if err == nil {
				err = nc.Flush()
				nc.Close()
			}
			if err != nil {
				return false, fmt.Sprintf("a user of the preloaded account %s does not connect through %s: %v", short(key), s.name(), err)
			}
			if c.Resolver != nil && c.Resolver.Type == "mem" {
				// The memory resolver holds only what is preloaded:
				// the account must run the preloaded claims.
				if got, err := s.accountJWT(key); err != nil || got != c.ResolverPreload[key] {
					return false, fmt.Sprintf("%s runs another JWT of account %s than its config preloads (%v)", s.name(), short(key), err)
				}
			}
		}
		if c.Resolver != nil && c.Resolver.Type == "full" {
			full++
		}
		sysAccount = c.SystemAccount
	}
	if ok, _, d := systemUserOnce(servers); !ok {
		return false, d
	}
	if ok, d := accountCrossesRoutes(servers, probe); !ok {
		return false, d
	}
	if probe.sysCreds == "" {
		return true, ""
	}
	answers, err := lookupAnswers(servers[0], probe.sysCreds, sysAccount)
	if err != nil {
		return false, err.Error()
	}
	if answers != full {
		return false, fmt.Sprintf("%d servers answer account lookups, %d run a full resolver by their config", answers, full)
	}
	return true, ""
}

// accountCrossesRoutes checks, for every account two neighbouring servers
// both preload (with creds in the probe), that a message a user of it
// publishes through one server reaches a subscriber of it on the next: the
// servers know the account as one across their routes, which is what the
// memory resolver has instead of lookups between peers.
func accountCrossesRoutes(servers []*natsServer, probe reloadProbe) (bool, string) {
	preloads := make([]map[string]string, len(servers))
	for i, s := range servers {
		var c runningConfig
		if err := json.Unmarshal(s.running.Config, &c); err != nil {
			return false, fmt.Sprintf("reading the config of %s: %v", s.name(), err)
		}
		preloads[i] = c.ResolverPreload
	}
	for i, sub := range servers {
		pub := servers[(i+1)%len(servers)]
		for _, key := range sortedCopy(slices.Collect(maps.Keys(preloads[i]))) {
			creds, ok := probe.accountCreds[key]
			if _, both := preloads[(i+1)%len(servers)][key]; !ok || !both {
				continue
			}
			if err := crossRoute(sub, pub, creds); err != nil {
				return false, fmt.Sprintf("in account %s, from %s to %s: %v", short(key), pub.name(), sub.name(), err)
			}
		}
	}
	return true, ""
}

// crossRoute subscribes through sub and publishes through pub as the user of
// creds until one message arrives (interest crosses the route after the
// subscription's flush, so the first publishes may find none).
func crossRoute(sub, pub *natsServer, creds string) error {
	connect := func(s *natsServer) (*nats.Conn, error) {
		return nats.Connect(s.url(), append(s.running.tlsOptions(), nats.Timeout(2*time.Second), nats.NoReconnect(), nats.IgnoreDiscoveredServers(), nats.UserCredentials(creds))...)
	}
	nsub, err := connect(sub)
	if err != nil {
		return err
	}
	defer nsub.Close()
	npub, err := connect(pub)
	if err != nil {
		return err
	}
	defer npub.Close()
	subject := nats.NewInbox()
	ch, err := nsub.SubscribeSync(subject)
	if err != nil {
		return err
	}
	if err := nsub.Flush(); err != nil {
		return err
	}
	for range 10 {
		if err := npub.Publish(subject, []byte("x")); err != nil {
			return err
		}
		if _, err := ch.NextMsg(200 * time.Millisecond); err == nil {
			return nil
		}
	}
	return fmt.Errorf("no message crossed the route in 2s")
}

// peerLookups polls until every server whose config has a full resolver
// lets in a user of an account that only the next such server holds, as
// after a push it missed: the server must fetch the account from its peers
// ($SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP, answered by a full resolver). The
// account's JWT is written into the holder's resolver directory, which a
// full resolver reads on every lookup. Every attempt issues new accounts, so
// no server has one cached. applies is false without the probe's fixture or
// with fewer than two servers on a full resolver. It returns the last result.
func peerLookups(t testing.TB, servers []*natsServer, probe reloadProbe, wait time.Duration) (applies, ok bool, detail string) {
	t.Helper()
	if probe.fixture == nil {
		return false, false, ""
	}
	type fullServer struct {
		s   *natsServer
		dir string
	}
	var full []fullServer
	for _, s := range servers {
		var c runningConfig
		if err := json.Unmarshal(s.running.Config, &c); err != nil {
			t.Fatalf("reading the config of %s: %v", s.name(), err)
		}
		if c.Resolver != nil && c.Resolver.Type == "full" {
			full = append(full, fullServer{s, c.Resolver.Dir})
		}
	}
	if len(full) < 2 {
		return false, false, ""
	}
	deadline := time.Now().Add(wait)
	for {
		ok, detail = true, ""
		for i, via := range full {
			holder := full[(i+1)%len(full)]
			a := probe.fixture.NewAccount(t, "peer")
			if err := os.WriteFile(filepath.Join(holder.dir, a.PublicKey+".jwt"), []byte(a.JWT), 0o600); err != nil {
				t.Fatal(err)
			}
			creds := filepath.Join(probe.dir, a.PublicKey+".creds")
			if err := os.WriteFile(creds, a.UserCreds(t, "peer-user"), 0o600); err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(via.s.url(), append(via.s.running.tlsOptions(), nats.Timeout(2*time.Second), nats.NoReconnect(), nats.IgnoreDiscoveredServers(), nats.UserCredentials(creds))...)
			if err == nil {
				err = nc.Flush()
				nc.Close()
			}
			if err != nil {
				ok, detail = false, fmt.Sprintf("a user of an account only %s holds does not connect through %s: %v", holder.s.name(), via.s.name(), err)
				break
			}
		}
		if ok || time.Now().After(deadline) {
			return true, ok, detail
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// jetStreamLimits are the limits the server's JetStream runs with (/jsz).
// accountJWT is the JWT of an account the server has loaded (/accountz).
func (s *natsServer) accountJWT(key string) (string, error) {
	b, err := s.get("/accountz?acc=" + key)
	if err != nil {
		return "", err
	}
	var v struct {
		Account *struct {
			JWT string `json:"jwt"`
		} `json:"account_detail"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return "", err
	}
	if v.Account == nil {
		return "", fmt.Errorf("/accountz has no account %s", short(key))
	}
	return v.Account.JWT, nil
}

func (s *natsServer) jetStreamLimits() (mem, file int64, err error) {
	b, err := s.get("/jsz")
	if err != nil {
		return 0, 0, err
	}
	var jz struct {
		Config struct {
			MaxMemory int64 `json:"max_memory"`
			MaxStore  int64 `json:"max_storage"`
		} `json:"config"`
	}
	if err := json.Unmarshal(b, &jz); err != nil {
		return 0, 0, err
	}
	return jz.Config.MaxMemory, jz.Config.MaxStore, nil
}

// lookupAnswers asks, through s as a system account user, for an account's
// JWT ($SYS.REQ.ACCOUNT.<key>.CLAIMS.LOOKUP) and counts the servers that
// answer within a second: every server whose resolver serves lookups.
func lookupAnswers(s *natsServer, sysCreds, account string) (int, error) {
	nc, err := nats.Connect(s.url(), append(s.running.tlsOptions(), nats.Timeout(2*time.Second), nats.NoReconnect(), nats.IgnoreDiscoveredServers(), nats.UserCredentials(sysCreds))...)
	if err != nil {
		return 0, fmt.Errorf("connecting to %s as a system user: %w", s.name(), err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		return 0, err
	}
	if err := nc.PublishRequest("$SYS.REQ.ACCOUNT."+account+".CLAIMS.LOOKUP", sub.Subject, nil); err != nil {
		return 0, err
	}
	n := 0
	for {
		if _, err := sub.NextMsg(time.Second); err != nil {
			return n, nil
		}
		n++
	}
}

// reload writes r's config over the server's config file and sends the
// process SIGHUP, then reads the server's log until it says whether it
// reloaded. It returns whether the server reloaded and kept running, what
// went wrong otherwise, and the "Reloaded: <option>" notices it logged.
func (s *natsServer) reload(t *testing.T, r serverRun, wait time.Duration) (ok bool, failure string, notices []string) {
	t.Helper()
	logPath := filepath.Join(s.local.Dir, "server.log")
	fi, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	from := fi.Size()
	if err := os.WriteFile(filepath.Join(s.local.Dir, "nats.conf"), r.Config, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatalf("signalling %s: %v", s.name(), err)
	}
	const reloaded, failed = "Reloaded server configuration", "Failed to reload server configuration: "
	deadline := time.Now().Add(wait)
	for {
		b, _ := os.ReadFile(logPath)
		if int64(len(b)) > from {
			log := string(b[from:])
			if i := strings.Index(log, failed); i >= 0 {
				e, _, _ := strings.Cut(log[i+len(failed):], "\n")
				return false, e, nil
			}
			if strings.Contains(log, reloaded) {
				for _, l := range strings.Split(log, "\n") {
					if _, n, ok := strings.Cut(l, "Reloaded: "); ok {
						notices = append(notices, n)
					}
				}
				select {
				case <-s.done:
					return false, "the server exited after reloading", notices
				case <-time.After(200 * time.Millisecond):
					return true, "", notices
				}
			}
		}
		select {
		case <-s.done:
			return false, fmt.Sprintf("the server exited: %s", lastLines(b[from:], 5)), nil
		default:
		}
		if time.Now().After(deadline) {
			return false, "the server logged no reload within " + wait.String(), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// TestConfigReloadMatrixCases checks the reload matrix's own cases without
// starting a server: Classify finds exactly the kinds each names.
func TestConfigReloadMatrixCases(t *testing.T) {
	for _, c := range reloadOnlyCases(t) {
		if got := classifyRendered(t, c.old.render(t), c.new.render(t)); !slices.Equal(got, c.kinds) {
			t.Errorf("%s: Classify(old, new) = %v, want exactly %v", c.name, got, c.kinds)
		}
	}
}
