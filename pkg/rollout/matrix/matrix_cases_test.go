package matrix

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/pki"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	. "github.com/nats-operator/nats-operator/pkg/rollout"
)

// The cases of the route-compatibility matrix: pairs of NatsCluster specs
// (the old one the servers start on, the new one they move to), each
// rendered by pkg/render, so the matrix proves the effects table against the
// configs the controller writes.

// matrixNamespace is the namespace of every NatsCluster of the matrix.
const matrixNamespace = "matrix"

// matrixSpec is one side of a case: a NatsCluster and, with spec.auth, its
// resolved trust.
type matrixSpec struct {
	cluster *clusterv1beta1.NatsCluster
	trust   *render.Trust
	// systemUser is the controller's system user (without auth only).
	systemUser *render.SystemUser
	// tls is the routes' and clients' TLS (matrixTLSFiles).
	tls render.TLS
}

// render renders the spec; a spec of the matrix always renders.
func (m matrixSpec) render(t testing.TB) *render.Output {
	t.Helper()
	out, err := render.Render(render.Input{Cluster: m.cluster, Trust: m.trust, SystemUser: m.systemUser, TLS: m.tls})
	if err != nil {
		t.Fatalf("rendering NatsCluster %s: %v", m.cluster.Name, err)
	}
	return out
}

// matrixCase is one change of the matrix. kinds are the change kinds
// Classify must find between the two rendered specs, no more and no fewer:
// the case proves the effect of exactly these.
type matrixCase struct {
	name     string
	kinds    []ChangeKind
	old, new matrixSpec
}

// matrixTrust is the trust material of the cases: NATS operator A with its
// system account SYS, a second system account SYS2 (another operator JWT of
// A naming it), and the accounts app and app2; NATS operator B with its own
// SYS and app re-issued by B (the same account key); and a user of app.
type matrixTrust struct {
	// a is operator A's trust with app; aWithApp2 adds app2.
	a, aWithApp2 *render.Trust
	// aOtherSystem is operator A naming SYS2 as its system account, with app.
	aOtherSystem *render.Trust
	// b is operator B's trust with app.
	b *render.Trust
	// appCreds is the creds file of a user of app, valid under A and B.
	appCreds string
}

func newMatrixTrust(t testing.TB) *matrixTrust {
	t.Helper()
	fa := rendertest.NewTrust(t, rendertest.WithAccounts("app", "app2"))
	fb := rendertest.NewTrust(t)
	app, app2 := fa.Accounts[0], fa.Accounts[1]
	accountTrust := func(a *rendertest.Account) render.AccountTrust {
		return render.AccountTrust{Name: a.Name, PublicKey: a.PublicKey, JWT: a.JWT}
	}

	// app issued by B's signing key: the same account under another operator.
	appByB := jwt.NewAccountClaims(app.PublicKey)
	appByB.Name = app.Name
	appByB.Limits.JetStreamLimits = jwt.JetStreamLimits{
		MemoryStorage: jwt.NoLimit, DiskStorage: jwt.NoLimit, Streams: jwt.NoLimit, Consumer: jwt.NoLimit,
	}
	appByBJWT, err := appByB.Encode(fb.SigningKey)
	if err != nil {
		t.Fatal(err)
	}

	// SYS2 issued by A's signing key, and an operator JWT of A naming it.
	sys2Key, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	sys2Pub, _ := sys2Key.PublicKey()
	sys2 := jwt.NewAccountClaims(sys2Pub)
	sys2.Name = "SYS2"
	sys2JWT, err := sys2.Encode(fa.SigningKey)
	if err != nil {
		t.Fatal(err)
	}
	opPub, _ := fa.Operator.PublicKey()
	skPub, _ := fa.SigningKey.PublicKey()
	op2 := jwt.NewOperatorClaims(opPub)
	op2.Name = "test-operator"
	op2.SigningKeys.Add(skPub)
	op2.SystemAccount = sys2Pub
	op2JWT, err := op2.Encode(fa.Operator)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	creds := filepath.Join(dir, "app.creds")
	if err := os.WriteFile(creds, app.UserCreds(t, "app-user"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &matrixTrust{
		a:            &render.Trust{OperatorJWT: fa.OperatorJWT, SystemAccountJWT: fa.System.JWT, Accounts: []render.AccountTrust{accountTrust(app)}},
		aWithApp2:    &render.Trust{OperatorJWT: fa.OperatorJWT, SystemAccountJWT: fa.System.JWT, Accounts: []render.AccountTrust{accountTrust(app), accountTrust(app2)}},
		aOtherSystem: &render.Trust{OperatorJWT: op2JWT, SystemAccountJWT: sys2JWT, Accounts: []render.AccountTrust{accountTrust(app)}},
		b:            &render.Trust{OperatorJWT: fb.OperatorJWT, SystemAccountJWT: fb.System.JWT, Accounts: []render.AccountTrust{{Name: app.Name, PublicKey: app.PublicKey, JWT: appByBJWT}}},
		appCreds:     creds,
	}
}

// matrixCases are the changes of the matrix. The base spec is a NatsCluster
// "demo" of 3 servers at rendertest.DefaultVersion with JetStream and
// explicit limits (so the servers do not size the store from this machine).
// A NatsCluster's servers are named after it, so "another cluster name"
// renames every server as well (demo-0 becomes other-0 on the same store).
func matrixCases(t testing.TB, tr *matrixTrust) []matrixCase {
	t.Helper()
	base := []rendertest.ClusterOption{rendertest.JetStreamLimits("256Mi", "1Gi")}
	noJetStream := func(nc *clusterv1beta1.NatsCluster) { nc.Spec.JetStream = nil }
	named := func(name string, opts ...rendertest.ClusterOption) matrixSpec {
		return matrixSpec{cluster: rendertest.NewCluster(matrixNamespace, name, slices.Concat(base, opts)...)}
	}
	spec := func(opts ...rendertest.ClusterOption) matrixSpec { return named("demo", opts...) }
	authed := func(trust *render.Trust, opts ...rendertest.ClusterOption) matrixSpec {
		var names []string
		for _, a := range trust.Accounts {
			names = append(names, a.Name)
		}
		s := spec(append([]rendertest.ClusterOption{rendertest.Auth("trust", names...)}, opts...)...)
		s.trust = trust
		return s
	}
	withSystemUser := func(s matrixSpec, u *render.SystemUser) matrixSpec { s.systemUser = u; return s }
	routeTLS, clientTLS, rotated, rotatedClient := tlsSpecs()
	cacheResolver := rendertest.Resolver(clusterv1beta1.ResolverCache)
	memResolver := rendertest.Resolver(clusterv1beta1.ResolverMemory)
	one := func(k ChangeKind) []ChangeKind { return []ChangeKind{k} }

	return append([]matrixCase{
		{"add auth", one(ChangeAddAuth), spec(), authed(tr.a)},
		{"remove auth", one(ChangeRemoveAuth), authed(tr.a), spec()},
		{"another NATS operator", one(ChangeOperator), authed(tr.a), authed(tr.b)},
		{"another system account", one(ChangeSystemAccount), authed(tr.a), authed(tr.aOtherSystem)},
		{"another cluster name", one(ChangeClusterName), spec(), named("other")},
		{"add a JetStream domain", one(ChangeJetStreamDomainAddRemove), spec(), spec(rendertest.Domain("hub"))},
		{"remove the JetStream domain", one(ChangeJetStreamDomainAddRemove), spec(rendertest.Domain("hub")), spec()},
		{"another JetStream domain", one(ChangeJetStreamDomain), spec(rendertest.Domain("east")), spec(rendertest.Domain("west"))},
		{"turn JetStream on", one(ChangeJetStream), spec(noJetStream), spec()},
		{"turn JetStream off", one(ChangeJetStream), spec(), spec(noJetStream)},
		{"patch version up", one(ChangeVersion), spec(rendertest.Version("2.15.1")), spec(rendertest.Version("2.15.2"))},
		{"patch version down", one(ChangeVersion), spec(rendertest.Version("2.15.2")), spec(rendertest.Version("2.15.1"))},
		{"raise JetStream limits", one(ChangeJetStreamLimitsRaised), spec(), spec(rendertest.JetStreamLimits("512Mi", "2Gi"))},
		{"lower JetStream limits", one(ChangeJetStreamLimitsLowered), spec(rendertest.JetStreamLimits("512Mi", "2Gi")), spec()},
		{"other server tags", one(ChangeServerTags), spec(), spec(rendertest.ServerTag("region", "east"))},
		{"add an account trust", one(ChangeAccounts), authed(tr.a), authed(tr.aWithApp2)},
		{"remove an account trust", one(ChangeAccounts), authed(tr.aWithApp2), authed(tr.a)},
		{"full to cache resolver", one(ChangeResolver), authed(tr.a), authed(tr.a, cacheResolver)},
		{"cache to full resolver", one(ChangeResolver), authed(tr.a, cacheResolver), authed(tr.a)},
		{"full to memory resolver", one(ChangeResolver), authed(tr.a), authed(tr.a, memResolver)},
		{"memory to full resolver", one(ChangeResolver), authed(tr.a, memResolver), authed(tr.a)},
		{"add an account trust, memory resolver", one(ChangeAccounts), authed(tr.a, memResolver), authed(tr.aWithApp2, memResolver)},
		{"add the system user", one(ChangeSystemUser), spec(), withSystemUser(spec(), rendertest.SystemUser())},
		{"remove the system user", one(ChangeSystemUser), withSystemUser(spec(), rendertest.SystemUser()), spec()},
		// No kind: the password hash is no fact, and this case proves it rolls.
		{"new system user password", nil, withSystemUser(spec(), rendertest.SystemUser()), withSystemUser(spec(), rendertest.RotatedSystemUser())},
		{"system user from a password to an nkey", one(ChangeSystemUserNKey), withSystemUser(spec(), rendertest.SystemUser()), withSystemUser(spec(), rendertest.NKeySystemUser())},
		{"system user from an nkey to a password", one(ChangeSystemUserNKey), withSystemUser(spec(), rendertest.NKeySystemUser()), withSystemUser(spec(), rendertest.SystemUser())},
		{"add the nkey system user", one(ChangeSystemUser), spec(), withSystemUser(spec(), rendertest.NKeySystemUser())},
		{"turn route TLS on", one(ChangeRouteTLS), spec(), routeTLS(spec())},
		{"turn route TLS off", one(ChangeRouteTLS), routeTLS(spec()), spec()},
		{"new route certificate", one(ChangeRouteCertificate), routeTLS(spec()), rotated(routeTLS(spec()))},
		// The new side's route files are of another CA (writeMatrixTLS).
		{"another route CA", one(ChangeRouteCA), routeTLS(spec()), otherRouteCA(routeTLS(spec()))},
		{"another route CA, with auth", one(ChangeRouteCA), routeTLS(authed(tr.a)), otherRouteCA(routeTLS(authed(tr.a)))},
		{"new client certificate", one(ChangeClientCertificate), clientTLS(spec()), rotatedClient(clientTLS(spec()))},
		{"turn client TLS on", one(ChangeClientTLS), spec(), clientTLS(spec())},
		{"turn client TLS off", one(ChangeClientTLS), clientTLS(spec()), spec()},
		// Lame duck settings are local to a server; nats-server reloads
		// neither ("config reload not supported for LameDuckGracePeriod").
		{"lame duck grace shortened", one(ChangeLameDuck), spec(), spec(rendertest.LameDuck("30s", "1s"))},
		{"lame duck duration longer", one(ChangeLameDuck), spec(), spec(rendertest.LameDuck("45s", ""))},
	}, slices.Concat(onBothPatchReleases(leafCases(spec)), listenerCases(spec, clientTLS))...)
}

// mqttListener is spec.mqtt over plain TCP with an ack wait (0: unset).
func mqttListener(ackWait time.Duration) rendertest.ClusterOption {
	return func(nc *clusterv1beta1.NatsCluster) {
		nc.Spec.MQTT = &clusterv1beta1.MQTTSpec{Port: 1883, NoTLS: true}
		if ackWait != 0 {
			nc.Spec.MQTT.AckWait = &metav1.Duration{Duration: ackWait}
		}
	}
}

// listenerCases are the cases of spec.websocket, spec.mqtt and
// spec.monitoring: listeners local to each server. What is measured is the
// servers side by side and reloaded; test/e2e connects WebSocket and MQTT
// clients.
func listenerCases(spec func(...rendertest.ClusterOption) matrixSpec, clientTLS func(matrixSpec) matrixSpec) []matrixCase {
	one := func(k ChangeKind) []ChangeKind { return []ChangeKind{k} }
	ws := func(port int32, noTLS bool) rendertest.ClusterOption {
		return func(nc *clusterv1beta1.NatsCluster) {
			nc.Spec.WebSocket = &clusterv1beta1.WebSocketSpec{Port: port, NoTLS: noTLS}
		}
	}
	mqtt := func(noTLS bool, ackWait time.Duration, maxAckPending int32) rendertest.ClusterOption {
		return func(nc *clusterv1beta1.NatsCluster) {
			nc.Spec.MQTT = &clusterv1beta1.MQTTSpec{Port: 1883, NoTLS: noTLS}
			if ackWait != 0 {
				nc.Spec.MQTT.AckWait = &metav1.Duration{Duration: ackWait}
			}
			if maxAckPending != 0 {
				nc.Spec.MQTT.MaxAckPending = &maxAckPending
			}
		}
	}
	monitorTLS := func(nc *clusterv1beta1.NatsCluster) { nc.Spec.Monitoring = &clusterv1beta1.MonitoringSpec{TLS: true} }
	return []matrixCase{
		{"add the WebSocket listener", one(ChangeWebSocket), spec(), spec(ws(8080, true))},
		{"remove the WebSocket listener", one(ChangeWebSocket), spec(ws(8080, true)), spec()},
		{"another WebSocket port", one(ChangeWebSocket), spec(ws(8080, true)), spec(ws(8081, true))},
		{"WebSocket over TLS", one(ChangeWebSocket), clientTLS(spec(ws(8080, true))), clientTLS(spec(ws(8080, false)))},
		{"add the MQTT listener", one(ChangeMQTT), spec(), spec(mqtt(true, 0, 0))},
		{"remove the MQTT listener", one(ChangeMQTT), spec(mqtt(true, 0, 0)), spec()},
		{"MQTT over TLS", one(ChangeMQTT), clientTLS(spec(mqtt(true, 0, 0))), clientTLS(spec(mqtt(false, 0, 0)))},
		{"another MQTT ack wait", one(ChangeMQTTDelivery), spec(mqtt(true, 0, 0)), spec(mqtt(true, time.Minute, 0))},
		{"another MQTT max ack pending", one(ChangeMQTTDelivery), spec(mqtt(true, 0, 0)), spec(mqtt(true, 0, 100))},
		{"monitoring over HTTPS", one(ChangeMonitorTLS), clientTLS(spec()), clientTLS(spec(monitorTLS))},
		{"monitoring back to HTTP", one(ChangeMonitorTLS), clientTLS(spec(monitorTLS)), clientTLS(spec())},
	}
}

// leafCases are the cases of spec.leafnodes: a leaf hub's listener, and a
// leaf remote (to a hub that refuses every connection: what is measured is
// the servers of this cluster, side by side and reloaded; test/e2e
// connects a leaf).
func leafCases(spec func(...rendertest.ClusterOption) matrixSpec) []matrixCase {
	one := func(k ChangeKind) []ChangeKind { return []ChangeKind{k} }
	routeTLS, _, _, _ := tlsSpecs()
	return []matrixCase{
		{"accept leaf connections", one(ChangeLeafnodesAccept), spec(), spec(rendertest.LeafNodes(true))},
		{"stop accepting leaf connections", one(ChangeLeafnodesAccept), spec(rendertest.LeafNodes(true)), spec()},
		{"a leaf remote added", one(ChangeLeafnodeRemotes), spec(), spec(rendertest.LeafNodes(false, leafRemote("hub", "nats://127.0.0.1:1")))},
		{"a leaf remote removed", one(ChangeLeafnodeRemotes), spec(rendertest.LeafNodes(false, leafRemote("hub", "nats://127.0.0.1:1"))), spec()},
		{"a leaf remote's URLs changed", one(ChangeLeafnodeRemotes), spec(rendertest.LeafNodes(false, leafRemote("hub", "nats://127.0.0.1:1"))),
			spec(rendertest.LeafNodes(false, leafRemote("hub", "nats://127.0.0.1:1", "nats://127.0.0.1:2")))},
		// TLS: the listener's with the routes' certificate; a remote's
		// with a CA file (writeMatrixTLS writes leaf-hub.ca.crt).
		{"leaf listener TLS on", one(ChangeLeafnodesTLS), routeTLS(spec(rendertest.LeafNodes(true))), routeTLS(spec(rendertest.LeafNodes(true), leafListenerTLS))},
		{"leaf listener TLS off", one(ChangeLeafnodesTLS), routeTLS(spec(rendertest.LeafNodes(true), leafListenerTLS)), routeTLS(spec(rendertest.LeafNodes(true)))},
		{"a leaf remote over TLS", one(ChangeLeafnodeRemotes), spec(rendertest.LeafNodes(false, leafRemote("hub", "nats://127.0.0.1:1"))),
			leafCAs(spec(rendertest.LeafNodes(false, tlsRemote)))},
		{"another CA of a leaf remote", one(ChangeLeafnodeRemotes), leafCAs(spec(rendertest.LeafNodes(false, tlsRemote))),
			otherLeafCAs(leafCAs(spec(rendertest.LeafNodes(false, tlsRemote))))},
	}
}

// leafListenerTLS turns the leaf listener's TLS on.
func leafListenerTLS(nc *clusterv1beta1.NatsCluster) {
	nc.Spec.LeafNodes.TLS = &clusterv1beta1.LeafNodesTLS{}
}

// tlsRemote is a leaf remote by URL over TLS, its CA from a Secret.
var tlsRemote = clusterv1beta1.LeafNodeRemote{Name: "hub", URLs: []string{"tls://127.0.0.1:1"},
	TLS: &clusterv1beta1.LeafRemoteTLS{CASecret: &clusterv1beta1.CAKeySelector{Name: "hub-ca"}}}

// leafCAs and otherLeafCAs give the spec's leaf remotes a CA digest, and
// another one (the file stays: a new digest is a new config to reload).
func leafCAs(s matrixSpec) matrixSpec      { s.tls.LeafCAs = "matrix"; return s }
func otherLeafCAs(s matrixSpec) matrixSpec { s.tls.LeafCAs = "another CA"; return s }

// olderPatchRelease is the other nats-server release the matrices run
// every gateway and leafnode case on, besides the default one
// (rendertest's), so that a release that answers differently fails a case.
const olderPatchRelease = "2.15.1"

// onVersion is s with every server on version.
func onVersion(version string, s matrixSpec) matrixSpec {
	s.cluster = s.cluster.DeepCopy()
	s.cluster.Spec.Version = version
	return s
}

// onBothPatchReleases is cases as they are (on rendertest's default
// version) and each again with both specs on olderPatchRelease, named
// "<case> (2.15.1)".
func onBothPatchReleases(cases []matrixCase) []matrixCase {
	out := slices.Clone(cases)
	for _, c := range cases {
		out = append(out, matrixCase{c.name + " (" + olderPatchRelease + ")", c.kinds, onVersion(olderPatchRelease, c.old), onVersion(olderPatchRelease, c.new)})
	}
	return out
}

// serverFacts are the planner's facts of a rendered server, as render
// reports them with the config.
func serverFacts(s render.Server) ConfigFacts { return ConfigFacts(s.Facts) }

// classifyRendered is what Classify finds between the rendered old and new
// specs of a case, server by server (the same ordinal on either side), as
// the set of kinds; it fails the test when servers disagree.
func classifyRendered(t testing.TB, old, new *render.Output) []ChangeKind {
	t.Helper()
	if len(old.Servers) != len(new.Servers) {
		t.Fatalf("old spec renders %d servers, new spec %d", len(old.Servers), len(new.Servers))
	}
	var first []ChangeKind
	for i := range old.Servers {
		var kinds []ChangeKind
		for _, c := range Classify(serverFacts(old.Servers[i]), serverFacts(new.Servers[i])) {
			kinds = append(kinds, c.Kind)
		}
		if i == 0 {
			first = kinds
		} else if !slices.Equal(kinds, first) {
			t.Fatalf("server %d classifies the change as %v, server 0 as %v", i, kinds, first)
		}
	}
	return first
}

// standaloneCaseKinds are the kinds TestStandaloneServerJoiningACluster
// (standalone_matrix_test.go) proves.
var standaloneCaseKinds = []ChangeKind{ChangeStandalone}

// TestRouteCompatibilityMatrixCases checks the cases without starting a
// server: each renders, Classify finds exactly the kinds the case names, and
// every change kind the planner knows is the kind of some case (of this
// matrix, or for the gateway's kinds of the gateway matrix).
func TestRouteCompatibilityMatrixCases(t *testing.T) {
	cases := matrixCases(t, newMatrixTrust(t))
	var covered []ChangeKind
	for _, c := range cases {
		got := classifyRendered(t, c.old.render(t), c.new.render(t))
		if diff := cmp.Diff(c.kinds, got); diff != "" {
			t.Errorf("%s: Classify(old, new) kinds (-want +got):\n%s", c.name, diff)
		}
		covered = append(covered, c.kinds...)
	}
	for _, c := range gatewayCases() {
		covered = append(covered, c.kinds...)
	}
	// One standalone server becoming three changes the number of servers,
	// which the route-compatibility matrix keeps: its own test measures it.
	covered = append(covered, standaloneCaseKinds...)
	for _, k := range ChangeKinds() {
		if !slices.Contains(covered, k) {
			t.Errorf("change kind %s is in no case of the route-compatibility matrix or the gateway matrix", k)
		}
	}
}

// matrixServers renders both specs of a case and places every server on
// this machine: server i of either side runs at the same loopback ports and
// on the same store directory. routes maps the pod host names of both sides
// (they differ only when the cluster's name does) to those places, so
// servers on the old and on the new spec route to each other.
func matrixServers(t testing.TB, c matrixCase) (locals []rendertest.Local, routes map[string]rendertest.Local, old, new *render.Output) {
	t.Helper()
	old, new = c.old.render(t), c.new.render(t)
	locals, _ = rendertest.LocalAddresses(t, old, c.old.cluster.Namespace, c.old.cluster.Name)
	routes = map[string]rendertest.Local{}
	for _, side := range []struct {
		nc  *clusterv1beta1.NatsCluster
		out *render.Output
	}{{c.old.cluster, old}, {c.new.cluster, new}} {
		if len(side.out.Servers) != len(locals) {
			t.Fatalf("%s renders %d servers, the old spec %d", side.nc.Name, len(side.out.Servers), len(locals))
		}
		for i, s := range side.out.Servers {
			routes[render.PodHost(side.nc.Name, side.nc.Namespace, s.Ordinal)] = locals[i]
		}
	}
	return locals, routes, old, new
}

// serverRuns localizes every rendered server of one side for its place.
func serverRuns(t testing.TB, spec matrixSpec, out *render.Output, bins map[string]string, locals []rendertest.Local, routes map[string]rendertest.Local, tr *matrixTrust) []serverRun {
	t.Helper()
	bin, ok := bins[spec.cluster.Spec.Version]
	if !ok {
		t.Fatalf("no nats-server binary for version %s", spec.cluster.Spec.Version)
	}
	runs := make([]serverRun, len(out.Servers))
	for i, s := range out.Servers {
		cfg, err := rendertest.LocalizeConfig(s.Config, locals[i], routes)
		if err != nil {
			t.Fatalf("localizing %s: %v", s.Name, err)
		}
		facts := serverFacts(s)
		runs[i] = serverRun{Name: s.Name, Binary: bin, Config: cfg, JetStream: facts.JetStream, MonitorTLS: facts.MonitorTLS}
		if facts.Operator != "" {
			runs[i].Creds = tr.appCreds
		}
		if facts.SystemUser && facts.SystemUserNKey {
			runs[i].SystemSeed = rendertest.SystemUserSeed
		} else if facts.SystemUser {
			runs[i].SystemPassword = systemUserPassword(spec.systemUser)
		}
		if facts.RouteTLS || facts.ClientTLS || strings.Contains(facts.LeafnodeRemotes, " tls") {
			ca := writeMatrixTLS(t, locals, locals[i].Dir)
			if facts.ClientTLS {
				runs[i].ClientCA = ca
			}
			if facts.RoutesCA == otherCADigest {
				// The routes of this side trust, and present, another CA.
				runs[i].Files = otherCAFiles(t, locals, locals[i].Dir)
			} else {
				runs[i].Files = matrixRouteFiles(t, locals, locals[i].Dir)
			}
		}
	}
	return runs
}

// tlsSpecs turn route TLS on, client TLS on, and give the routes' or the
// clients' TLS Secret a new certificate (digest).
func tlsSpecs() (routeTLS, clientTLS, rotatedRoutes, rotatedClient func(matrixSpec) matrixSpec) {
	routeTLS = func(s matrixSpec) matrixSpec { s.tls.Routes = matrixTLSFiles; return s }
	clientTLS = func(s matrixSpec) matrixSpec {
		f := *matrixTLSFiles
		f.Verify = false
		s.tls.Client = &f
		s.cluster = s.cluster.DeepCopy()
		s.cluster.Spec.TLS = &clusterv1beta1.ClientTLS{Secret: &clusterv1beta1.TLSSecretRef{Name: f.Secret, CertKey: f.CertKey, KeyKey: f.KeyKey, CAKey: f.CAKey}}
		return s
	}
	rotatedRoutes = func(s matrixSpec) matrixSpec {
		f := *s.tls.Routes
		f.Digest = "rotated"
		s.tls.Routes = &f
		return s
	}
	rotatedClient = func(s matrixSpec) matrixSpec {
		f := *s.tls.Client
		f.Digest = "rotated"
		s.tls.Client = &f
		return s
	}
	return routeTLS, clientTLS, rotatedRoutes, rotatedClient
}

// matrixTLSFiles are the TLS Secrets a case renders with: the matrix writes
// their files itself (writeMatrixTLS).
var matrixTLSFiles = &render.TLSFiles{Secret: "demo-tls", CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt", Digest: "matrix", CADigest: "matrix", Verify: true}

// otherRouteCA gives the spec's routes a certificate of another CA:
// writeMatrixTLS writes that CA's material for a server whose route
// CADigest is otherCADigest.
func otherRouteCA(s matrixSpec) matrixSpec {
	f := *s.tls.Routes
	f.CADigest = otherCADigest
	s.tls.Routes = &f
	return s
}

const otherCADigest = "other-ca"

// writeMatrixTLS writes a CA and a certificate under it for every local
// address (IP SANs: routes and clients dial the loopback addresses) into
// dir/config/{routes-tls,client-tls}, as the config volume holds them, and
// returns the CA.
func writeMatrixTLS(t testing.TB, locals []rendertest.Local, dir string) []byte {
	t.Helper()
	matrixPKI.once.Do(func() {
		now := time.Now()
		matrixPKI.ca, matrixPKI.err = pki.NewCA("matrix CA", now)
	})
	if matrixPKI.err != nil {
		t.Fatal(matrixPKI.err)
	}
	leaf := issueForLocals(t, matrixPKI.ca, locals)
	for _, sub := range []string{render.RoutesTLSDir, render.ClientTLSDir} {
		d := filepath.Join(dir, "config", sub)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"tls.crt": leaf.Cert, "tls.key": leaf.Key, "ca.crt": matrixPKI.ca.Cert} {
			if err := os.WriteFile(filepath.Join(d, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The CA of leaf remote hub (tlsRemote), as the config volume has it.
	if err := os.WriteFile(filepath.Join(dir, "config", render.LeafCAKey("hub")), matrixPKI.ca.Cert, 0o600); err != nil {
		t.Fatal(err)
	}
	return matrixPKI.ca.Cert
}

// matrixRouteFiles are the route TLS files of writeMatrixTLS, to be
// written again when a server of a side starts (the other side of the
// case may have written another CA's there).
func matrixRouteFiles(t testing.TB, locals []rendertest.Local, dir string) map[string][]byte {
	t.Helper()
	d := filepath.Join(dir, "config", render.RoutesTLSDir)
	out := map[string][]byte{}
	for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
		b, err := os.ReadFile(filepath.Join(d, name))
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Join(d, name)] = b
	}
	return out
}

// otherCAFiles are route TLS files of a second CA: a certificate of it for
// every local address, and it alone as the CA routes are checked against.
func otherCAFiles(t testing.TB, locals []rendertest.Local, dir string) map[string][]byte {
	t.Helper()
	otherPKI.once.Do(func() { otherPKI.ca, otherPKI.err = pki.NewCA("matrix other CA", time.Now()) })
	if otherPKI.err != nil {
		t.Fatal(otherPKI.err)
	}
	leaf := issueForLocals(t, otherPKI.ca, locals)
	d := filepath.Join(dir, "config", render.RoutesTLSDir)
	return map[string][]byte{filepath.Join(d, "tls.crt"): leaf.Cert, filepath.Join(d, "tls.key"): leaf.Key, filepath.Join(d, "ca.crt"): otherPKI.ca.Cert}
}

// issueForLocals issues a certificate of ca for every local address (IP
// SANs: routes and clients dial the loopback addresses).
func issueForLocals(t testing.TB, ca pki.Pair, locals []rendertest.Local) pki.Pair {
	t.Helper()
	var ips []net.IP
	for _, l := range locals {
		ips = append(ips, net.ParseIP(l.Host))
	}
	leaf, err := pki.IssueForIPs(ca, "matrix", ips, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

var otherPKI struct {
	once sync.Once
	ca   pki.Pair
	err  error
}

var matrixPKI struct {
	once sync.Once
	ca   pki.Pair
	err  error
}

// leafRemote is a leaf remote by URLs, without credentials.
func leafRemote(name string, urls ...string) clusterv1beta1.LeafNodeRemote {
	return clusterv1beta1.LeafNodeRemote{Name: name, URLs: urls}
}
