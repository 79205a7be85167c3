package observe

// Helpers that run real nats-server clusters in the test process: every
// server on one loopback address (testHost) with its own client, route and monitoring ports, a
// JetStream store in a temporary directory, and optionally operator-mode
// trust made with nats-io/jwt.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/nats-operator/nats-operator/internal/testport"
)

// testRevision is the config revision every test server reports.
const testRevision = "0123456789"

// trust is operator-mode trust made for one test.
type trust struct {
	operatorJWT string
	operatorPub string
	systemPub   string
	systemJWT   string
	appPub      string
	appJWT      string
	systemCreds []byte // a user of the system account
	appCreds    []byte // a user of APP, which has JetStream
}

func newTrust(t testing.TB) *trust {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, _ := okp.PublicKey()
	skp, err := nkeys.CreateAccount()
	must(err)
	spub, _ := skp.PublicKey()
	akp, err := nkeys.CreateAccount()
	must(err)
	apub, _ := akp.PublicKey()

	oc := jwt.NewOperatorClaims(opub)
	oc.Name = "test-operator"
	oc.SystemAccount = spub
	ojwt, err := oc.Encode(okp)
	must(err)

	sc := jwt.NewAccountClaims(spub)
	sc.Name = "SYS"
	sjwt, err := sc.Encode(okp)
	must(err)

	ac := jwt.NewAccountClaims(apub)
	ac.Name = "APP"
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1, MaxAckPending: -1}
	ajwt, err := ac.Encode(okp)
	must(err)

	user := func(akp nkeys.KeyPair) []byte {
		ukp, err := nkeys.CreateUser()
		must(err)
		upub, _ := ukp.PublicKey()
		useed, _ := ukp.Seed()
		uc := jwt.NewUserClaims(upub)
		ujwt, err := uc.Encode(akp)
		must(err)
		creds, err := jwt.FormatUserConfig(ujwt, useed)
		must(err)
		return creds
	}
	return &trust{
		operatorJWT: ojwt, operatorPub: opub,
		systemPub: spub, systemJWT: sjwt, appPub: apub, appJWT: ajwt,
		systemCreds: user(skp), appCreds: user(akp),
	}
}

// config is the trust's part of a server config (resolver MEMORY).
func (tr *trust) config(conf map[string]any) {
	conf["operator"] = tr.operatorJWT
	conf["system_account"] = tr.systemPub
	conf["resolver"] = "MEMORY"
	conf["resolver_preload"] = map[string]string{tr.systemPub: tr.systemJWT, tr.appPub: tr.appJWT}
}

// testServer is one server of a testCluster.
type testServer struct {
	name                              string
	clientPort, clusterPort, httpPort int
	storeDir                          string
	confPath                          string
	revision                          string
	trust                             *trust // nil: no auth
	routes                            []string
	clusterName                       string
	srv                               *server.Server
}

// testCluster is a set of in-process servers routed to each other.
type testCluster struct {
	t       testing.TB
	name    string
	servers []*testServer
}

// testHost is the loopback address this test binary's servers listen on:
// one of 127.64.0.0/10 chosen at random, so servers of test packages running
// in parallel (most listen on 127.0.0.1) do not take each other's ports
// between freePort and the listen.
var testHost = fmt.Sprintf("127.%d.%d.%d", 64+rand.IntN(128), rand.IntN(256), 1+rand.IntN(254))

func freePort(t testing.TB) int { return testport.Free(t, testHost) }

// startCluster starts one server per name, all routed to each other.
// trustOf says which servers run in operator mode (nil: none).
func startCluster(t testing.TB, cluster string, names []string, trustOf func(i int) *trust) *testCluster {
	t.Helper()
	c := &testCluster{t: t, name: cluster}
	var routes []string
	for _, name := range names {
		s := &testServer{
			name: name, clusterName: cluster,
			clientPort: freePort(t), clusterPort: freePort(t), httpPort: freePort(t),
			storeDir: t.TempDir(), revision: testRevision,
		}
		s.confPath = filepath.Join(t.TempDir(), "nats.conf")
		routes = append(routes, fmt.Sprintf("nats://%s:%d", testHost, s.clusterPort))
		c.servers = append(c.servers, s)
	}
	for i, s := range c.servers {
		s.routes = routes
		if trustOf != nil {
			s.trust = trustOf(i)
		}
	}
	for _, s := range c.servers {
		s.start(t)
	}
	t.Cleanup(c.shutdown)
	return c
}

// writeConfig writes the server's config file, the way a pod gets it: a
// file, so that a RELOAD re-reads it.
func (s *testServer) writeConfig(t testing.TB) {
	t.Helper()
	conf := map[string]any{
		"server_name":     s.name,
		"listen":          fmt.Sprintf("%s:%d", testHost, s.clientPort),
		"http":            fmt.Sprintf("%s:%d", testHost, s.httpPort),
		"server_metadata": map[string]string{MetadataConfigRevision: s.revision},
		"jetstream":       map[string]string{"store_dir": s.storeDir},
	}
	if len(s.routes) > 1 {
		conf["cluster"] = map[string]any{"name": s.clusterName, "listen": fmt.Sprintf("%s:%d", testHost, s.clusterPort), "routes": s.routes}
	}
	if s.trust != nil {
		s.trust.config(conf)
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.confPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (s *testServer) options(t testing.TB) *server.Options {
	t.Helper()
	s.writeConfig(t)
	o, err := server.ProcessConfigFile(s.confPath)
	if err != nil {
		t.Fatalf("parsing the config of %s: %v", s.name, err)
	}
	o.NoSigs, o.NoLog = true, true
	return o
}

// start starts (or restarts, on the same store and ports) the server.
func (s *testServer) start(t testing.TB) {
	t.Helper()
	srv, err := server.NewServer(s.options(t))
	if err != nil {
		t.Fatalf("starting %s: %v", s.name, err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatalf("%s not ready for connections", s.name)
	}
	s.srv = srv
}

func (s *testServer) stop() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

func (c *testCluster) shutdown() {
	for _, s := range c.servers {
		s.stop()
	}
}

func (c *testCluster) server(name string) *testServer {
	for _, s := range c.servers {
		if s.name == name {
			return s
		}
	}
	c.t.Fatalf("no server %s", name)
	return nil
}

// target is the Target of the cluster, every server on its own ports.
func (c *testCluster) target(creds []byte) Target {
	t := Target{Cluster: "test/" + c.name, SystemCredentials: creds}
	for _, s := range c.servers {
		t.Servers = append(t.Servers, ServerAddr{Name: s.name, Host: testHost, MonitorPort: s.httpPort, ClientPort: s.clientPort})
	}
	return t
}

// connect returns a client connection to the named server.
func (c *testCluster) connect(name string, creds []byte) *nats.Conn {
	c.t.Helper()
	s := c.server(name)
	opts := []nats.Option{nats.Timeout(5 * time.Second)}
	if creds != nil {
		ujwt, _ := jwt.ParseDecoratedJWT(creds)
		kp, _ := jwt.ParseDecoratedUserNKey(creds)
		seed, _ := kp.Seed()
		opts = append(opts, nats.UserJWTAndSeed(ujwt, string(seed)))
	}
	nc, err := nats.Connect(fmt.Sprintf("nats://%s:%d", testHost, s.clientPort), opts...)
	if err != nil {
		c.t.Fatalf("connecting to %s: %v", name, err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// addStreams makes n R3 file streams, each with two durable consumers, and
// publishes a few messages to each. It retries while JetStream is still
// electing its meta leader.
func addStreams(t testing.TB, nc *nats.Conn, n, replicas int, storage jetstream.StorageType, consumers int) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range n {
		name := fmt.Sprintf("S%d", i)
		var st jetstream.Stream
		for {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			st, err = js.CreateStream(rctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Replicas: replicas, Storage: storage})
			rcancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			<-time.After(100 * time.Millisecond) // JetStream not ready yet: retry
		}
		if err != nil {
			t.Fatalf("creating stream %s: %v", name, err)
		}
		for j := range consumers {
			if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: fmt.Sprintf("C%d", j), AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
				t.Fatalf("creating consumer C%d of %s: %v", j, name, err)
			}
		}
		if consumers > 0 {
			for k := range 3 {
				if _, err := js.Publish(ctx, fmt.Sprintf("%s.%d", name, k), []byte("hello"),
					jetstream.WithRetryAttempts(40), jetstream.WithRetryWait(100*time.Millisecond)); err != nil {
					t.Fatalf("publishing to %s: %v", name, err)
				}
			}
		}
	}
}

// waitFor observes until cond holds or the deadline passes, and returns the
// last snapshot. Servers form clusters and elect leaders on their own time,
// so tests against real servers poll with a deadline.
func waitFor(t testing.TB, o *Observer, target Target, within time.Duration, what string, cond func(*Snapshot) bool) *Snapshot {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		snap := o.Observe(context.Background(), target)
		if cond(snap) {
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %s for %s; last verdict %s %s: %s", within, what, snap.Verdict.Status, snap.Verdict.Reason, snap.Verdict.Message)
		}
		<-time.After(50 * time.Millisecond)
	}
}

func settled(s *Snapshot) bool { return s.Verdict.Settled() }

// logSnapshot writes a compact account of a snapshot to the test log.
func logSnapshot(t testing.TB, snap *Snapshot) {
	t.Helper()
	t.Logf("verdict: %s %s: %s (took %s)", snap.Verdict.Status, snap.Verdict.Reason, snap.Verdict.Message, snap.Took.Round(time.Millisecond))
	for _, s := range snap.Servers {
		t.Logf("  %s answered=%v version=%s revision=%s auth=%s sys=%.12s routes=%v missing=%v meta-leader=%q meta=%v err=%q",
			s.Name, s.Answered, s.Version, s.ConfigRevision, s.Auth.Mode(), s.Auth.SystemAccount, s.Routes, s.MissingRoutes, s.MetaLeader, s.MetaMembers, s.Err)
	}
	t.Logf("  groups=%d streams=%d meta-leader=%q", len(snap.Groups), snap.StreamCount(), snap.MetaLeader)
}
