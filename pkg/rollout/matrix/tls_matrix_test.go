package matrix

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// The TLS matrix: what nats-server 2.15.2 does, as real processes, when
// route TLS (cluster { tls { ... } }) and client TLS (the top-level tls
// block) are turned on and off, rotated, and verified, so the planner can
// classify these changes on measured answers. The servers run configs
// rendered by pkg/render and localized by rendertest.LocalizeConfig; the
// renderer has no TLS yet, so this file writes the TLS blocks into the
// localized JSON itself (withTLS) and makes the certificates with
// crypto/x509: a CA and, per server, an ECDSA P-256 certificate with the
// server's loopback address as an IP SAN (routes in a localized config point
// at IPs) and its stable DNS name (render.PodHost) as a DNS SAN.
//
// What the answers mean for the planner, in short (each test says more):
//
//   - Route TLS on or off, restarting one server at a time, splits the
//     cluster at every mixed stage (TestTLSRouteRollout); by reload it is
//     accepted and nothing splits, but the routes stay as they were
//     (plaintext or TLS) until they reconnect, and a route that reconnects
//     while servers disagree cannot form (TestTLSRouteReload). So: reload
//     every server, then restart them one at a time so every route
//     reconnects under TLS.
//   - A route certificate or CA rotated in place reloads, with no route
//     closed and no write stopped (TestTLSRouteRotation). A CA rotation must
//     go bundle (old + new) everywhere, then certificates of the new CA
//     everywhere, then the new CA alone; a reload in the wrong order is
//     accepted too and only the next route connection shows it.
//   - Client TLS on, verify on and client certificate rotation reload
//     (TestTLSClientReload); clients connected before stay.
//   - A rotation shows in /varz only as tls_cert_not_after (client TLS) and
//     cluster.tls_cert_not_after (routes) next to config_load_time;
//     config_digest does not change and /routez says nothing of TLS
//     (TestTLSRouteMonitoring). /varz cluster.tls_required is stale after a
//     reload (TestTLSRouteReload).
//   - Route certificates need an IP SAN for route URLs by IP and both the
//     server and client auth extended key usages; route TLS verifies client
//     certificates whatever verify says (TestTLSRouteVerification).

// ---- certificates ----

// tlsCA is a certificate authority of the matrix.
type tlsCA struct {
	name string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTLSCA(t testing.TB, name string) *tlsCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          tlsSerial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &tlsCA{name: name, cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func tlsSerial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// tlsBundle is the PEM of the CAs, in order.
func tlsBundle(cas ...*tlsCA) []byte {
	var b []byte
	for _, ca := range cas {
		b = append(b, ca.pem...)
	}
	return b
}

func tlsPool(cas ...*tlsCA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.cert)
	}
	return p
}

// leafSpec is what a certificate the matrix issues names.
type leafSpec struct {
	name     string
	dns      []string
	ips      []net.IP
	notAfter time.Time
	// usages are the extended key usages; nil: server and client auth
	// (a route certificate is presented by both ends of a route).
	usages []x509.ExtKeyUsage
}

// tlsLeaf is an issued certificate with its key.
type tlsLeaf struct {
	cert            *x509.Certificate
	certPEM, keyPEM []byte
}

func (ca *tlsCA) issue(t testing.TB, spec leafSpec) tlsLeaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	usages := spec.usages
	if usages == nil {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: tlsSerial(t),
		Subject:      pkix.Name{CommonName: spec.name},
		DNSNames:     spec.dns,
		IPAddresses:  spec.ips,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     spec.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return tlsLeaf{
		cert:    cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}
}

func (l tlsLeaf) pair(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(l.certPEM, l.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ---- configs ----

// tlsBlock is a tls { } block of nats.conf.
type tlsBlock struct {
	Cert, Key, CA string
	Verify        bool
	// Timeout is the handshake timeout in seconds (0: not written).
	Timeout float64
}

func (b *tlsBlock) conf() map[string]any {
	m := map[string]any{"cert_file": b.Cert, "key_file": b.Key, "ca_file": b.CA, "verify": b.Verify}
	if b.Timeout > 0 {
		m["timeout"] = b.Timeout
	}
	return m
}

// withTLS writes route TLS (cluster.tls) and client TLS (the top-level tls)
// into a localized config; a nil block leaves that TLS off.
func withTLS(cfg []byte, route, client *tlsBlock) ([]byte, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(cfg))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	cl, ok := m["cluster"].(map[string]any)
	if !ok {
		return nil, errors.New("the config has no cluster block")
	}
	delete(cl, "tls")
	if route != nil {
		cl["tls"] = route.conf()
	}
	delete(m, "tls")
	if client != nil {
		m["tls"] = client.conf()
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ---- the fixture ----

// tlsFixture is a rendered cluster placed on this machine, its servers, the
// TLS blocks each runs, and the files those name.
type tlsFixture struct {
	t       *testing.T
	name    string
	locals  []rendertest.Local
	plain   []serverRun
	servers []*natsServer
	// route and client are the blocks each server runs (nil: off).
	route, client []*tlsBlock
	// ca issued the servers' first certificates and the client user's.
	ca *tlsCA
	// user is a client certificate of ca (client auth only), in the files
	// userCert and userKey.
	user              tlsLeaf
	userCert, userKey string
	// lastRouteLeaf and lastClientLeaf are the certificates last written
	// for each server.
	lastRouteLeaf, lastClientLeaf []tlsLeaf
	mu                            sync.Mutex
	notAfter                      time.Time
}

// tlsFixtureOptions: how many servers, with JetStream (explicit limits),
// with the controller's system user (for $SYS reloads).
type tlsFixtureOptions struct {
	servers               int32
	jetStream, systemUser bool
}

func newTLSFixture(t *testing.T, name string, o tlsFixtureOptions) *tlsFixture {
	t.Helper()
	opts := []rendertest.ClusterOption{rendertest.Replicas(o.servers)}
	if o.jetStream {
		opts = append(opts, rendertest.JetStreamLimits("256Mi", "1Gi"))
	}
	spec := matrixSpec{cluster: rendertest.NewCluster(matrixNamespace, name, opts...)}
	if o.systemUser {
		spec.systemUser = rendertest.SystemUser()
	}
	out := spec.render(t)
	locals, routes := rendertest.LocalAddresses(t, out, matrixNamespace, name)
	bin := natsBinary(t, rendertest.DefaultVersion)
	f := &tlsFixture{t: t, name: name, locals: locals, ca: newTLSCA(t, name+"-ca"),
		route: make([]*tlsBlock, len(locals)), client: make([]*tlsBlock, len(locals)),
		lastRouteLeaf: make([]tlsLeaf, len(locals)), lastClientLeaf: make([]tlsLeaf, len(locals)),
		notAfter: time.Now().Add(90 * 24 * time.Hour).Truncate(time.Hour)}
	for i, s := range out.Servers {
		cfg, err := rendertest.LocalizeConfig(s.Config, locals[i], routes)
		if err != nil {
			t.Fatalf("localizing %s: %v", s.Name, err)
		}
		f.plain = append(f.plain, serverRun{Name: s.Name, Binary: bin, Config: cfg, JetStream: serverFacts(s).JetStream,
			SystemPassword: systemUserPassword(spec.systemUser)})
		f.servers = append(f.servers, &natsServer{local: locals[i]})
		if err := os.MkdirAll(filepath.Join(locals[i].Dir, "tls"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.user = f.ca.issue(t, leafSpec{name: "client-user", notAfter: f.nextNotAfter(), usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	f.userCert, f.userKey = filepath.Join(locals[0].Dir, "tls", "user.crt"), filepath.Join(locals[0].Dir, "tls", "user.key")
	for p, b := range map[string][]byte{f.userCert: f.user.certPEM, f.userKey: f.user.keyPEM} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range f.servers {
			s.stop()
		}
	})
	return f
}

// nextNotAfter is a new expiry, an hour after the last one handed out: every
// certificate the fixture issues expires at its own time, so /varz
// tls_cert_not_after tells them apart.
func (f *tlsFixture) nextNotAfter() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notAfter = f.notAfter.Add(time.Hour)
	return f.notAfter
}

func (f *tlsFixture) file(i int, name string) string {
	return filepath.Join(f.locals[i].Dir, "tls", name)
}

func (f *tlsFixture) write(i int, name string, b []byte) {
	f.t.Helper()
	// Rewritten in place: the path the config names stays (as a mounted
	// Secret's file paths do).
	if err := os.WriteFile(f.file(i, name), b, 0o600); err != nil {
		f.t.Fatal(err)
	}
}

// serverLeaf issues server i a certificate of ca: the server's loopback
// address as an IP SAN and its stable DNS name as a DNS SAN, changed by mod.
func (f *tlsFixture) serverLeaf(ca *tlsCA, i int, mod func(*leafSpec)) tlsLeaf {
	f.t.Helper()
	spec := leafSpec{
		name:     f.plain[i].Name,
		dns:      []string{render.PodHost(f.name, matrixNamespace, int32(i))},
		ips:      []net.IP{net.ParseIP(f.locals[i].Host)},
		notAfter: f.nextNotAfter(),
	}
	if mod != nil {
		mod(&spec)
	}
	return ca.issue(f.t, spec)
}

// writeRouteCert writes server i's route certificate and key in place.
func (f *tlsFixture) writeRouteCert(i int, l tlsLeaf) {
	f.write(i, "route.crt", l.certPEM)
	f.write(i, "route.key", l.keyPEM)
	f.lastRouteLeaf[i] = l
}

func (f *tlsFixture) writeRouteCA(i int, cas ...*tlsCA) {
	f.write(i, "route-ca.crt", tlsBundle(cas...))
}

func (f *tlsFixture) writeClientCert(i int, l tlsLeaf) {
	f.write(i, "client.crt", l.certPEM)
	f.write(i, "client.key", l.keyPEM)
	f.lastClientLeaf[i] = l
}

func (f *tlsFixture) writeClientCA(i int, cas ...*tlsCA) {
	f.write(i, "client-ca.crt", tlsBundle(cas...))
}

// routeBlock is server i's cluster tls block.
func (f *tlsFixture) routeBlock(i int, verify bool) *tlsBlock {
	return &tlsBlock{Cert: f.file(i, "route.crt"), Key: f.file(i, "route.key"), CA: f.file(i, "route-ca.crt"), Verify: verify, Timeout: 5}
}

// clientBlock is server i's top-level tls block.
func (f *tlsFixture) clientBlock(i int, verify bool) *tlsBlock {
	return &tlsBlock{Cert: f.file(i, "client.crt"), Key: f.file(i, "client.key"), CA: f.file(i, "client-ca.crt"), Verify: verify, Timeout: 5}
}

// setUpRouteTLS issues every server a route certificate of f.ca and writes
// it with the CA, without turning route TLS on.
func (f *tlsFixture) setUpRouteTLS() {
	for i := range f.servers {
		f.writeRouteCert(i, f.serverLeaf(f.ca, i, nil))
		f.writeRouteCA(i, f.ca)
	}
}

func (f *tlsFixture) setUpClientTLS() {
	for i := range f.servers {
		f.writeClientCert(i, f.serverLeaf(f.ca, i, nil))
		f.writeClientCA(i, f.ca)
	}
}

// runOf is server i's plain config with these TLS blocks.
func (f *tlsFixture) runOf(i int, route, client *tlsBlock) serverRun {
	f.t.Helper()
	r := f.plain[i]
	cfg, err := withTLS(r.Config, route, client)
	if err != nil {
		f.t.Fatalf("writing TLS into the config of %s: %v", r.Name, err)
	}
	r.Config = cfg
	return r
}

// runs is every server's config with the same kind of blocks.
func (f *tlsFixture) runs(routeTLS bool) []serverRun {
	runs := make([]serverRun, len(f.servers))
	for i := range f.servers {
		var route *tlsBlock
		if routeTLS {
			route = f.routeBlock(i, true)
		}
		runs[i] = f.runOf(i, route, nil)
	}
	return runs
}

// startAll starts every server on the blocks in f.route and f.client and
// waits for the cluster to form.
func (f *tlsFixture) startAll() {
	f.t.Helper()
	for i, s := range f.servers {
		s.start(f.t, f.runOf(i, f.route[i], f.client[i]))
	}
	acked := 0
	if st := observeStage(f.servers, false, &acked, 60*time.Second); !st.ok() {
		f.t.Fatalf("the cluster did not form: %s (%s)", st, st.detail)
	}
}

// restart stops server i and starts it on the config it runs.
func (f *tlsFixture) restart(i int) {
	f.t.Helper()
	f.servers[i].stop()
	f.servers[i].start(f.t, f.runOf(i, f.route[i], f.client[i]))
}

// clientOptions connect a client to server i as its client TLS requires:
// with client TLS on, trusting its client CA file and, withCert, presenting
// the fixture's user certificate.
func (f *tlsFixture) clientOptions(i int, withCert bool) []nats.Option {
	opts := []nats.Option{nats.Timeout(3 * time.Second), nats.NoReconnect(), nats.IgnoreDiscoveredServers()}
	if b := f.client[i]; b != nil {
		opts = append(opts, nats.RootCAs(b.CA))
		if withCert {
			opts = append(opts, nats.ClientCert(f.userCert, f.userKey))
		}
	}
	return opts
}

// ---- reloads ----

// tlsReload is what one reload did.
type tlsReload struct {
	accepted bool
	// err is the refusal ("" when accepted).
	err string
	// notices are the "Reloaded: <option>" lines the server logged.
	notices []string
}

func (r tlsReload) String() string {
	if !r.accepted {
		return "refused: " + r.err
	}
	return fmt.Sprintf("accepted %q", r.notices)
}

// reloadSys writes server i's config with these blocks over its config file
// and asks it to reload as the controller's system user
// ($SYS.REQ.SERVER.<id>.RELOAD, through the server itself); the reply says
// whether it reloaded, and the log what it reloaded. On success the blocks
// are what the server runs; on a refusal the new config stays on disk.
func (f *tlsFixture) reloadSys(i int, route, client *tlsBlock) tlsReload {
	f.t.Helper()
	s := f.servers[i]
	run := f.runOf(i, route, client)
	if err := os.WriteFile(filepath.Join(s.local.Dir, "nats.conf"), run.Config, 0o600); err != nil {
		f.t.Fatal(err)
	}
	from := logSize(f.t, s)
	v, err := readTLSVarz(s)
	if err != nil {
		f.t.Fatalf("reading /varz of %s: %v", s.name(), err)
	}
	nc, err := nats.Connect(s.url(), append(f.clientOptions(i, true), nats.UserInfo(render.SystemUserName, s.running.SystemPassword))...)
	if err != nil {
		f.t.Fatalf("connecting to %s as the system user: %v", s.name(), err)
	}
	defer nc.Close()
	m, err := nc.Request(fmt.Sprintf("$SYS.REQ.SERVER.%s.RELOAD", v.ServerID), nil, 10*time.Second)
	if err != nil {
		f.t.Fatalf("asking %s to reload: %v", s.name(), err)
	}
	var reply struct {
		Server *struct {
			Name string `json:"name"`
		} `json:"server"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		f.t.Fatalf("decoding the reload reply of %s: %v (%s)", s.name(), err, m.Data)
	}
	if reply.Error != nil {
		return tlsReload{err: reply.Error.Description}
	}
	if reply.Server == nil || reply.Server.Name != s.name() {
		f.t.Fatalf("the reload of %s was answered by %s", s.name(), m.Data)
	}
	// The reply comes once the reload is done; the notices are logged before.
	var notices []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		log := logFrom(f.t, s, from)
		if strings.Contains(log, "Reloaded server configuration") || time.Now().After(deadline) {
			notices = reloadNotices(log)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.running = run
	f.route[i], f.client[i] = route, client
	return tlsReload{accepted: true, notices: notices}
}

// reloadSignal does the same by SIGHUP (natsServer.reload, confirmed from
// the log).
func (f *tlsFixture) reloadSignal(i int, route, client *tlsBlock) tlsReload {
	f.t.Helper()
	run := f.runOf(i, route, client)
	ok, failure, notices := f.servers[i].reload(f.t, run, 10*time.Second)
	if ok {
		f.servers[i].running = run
		f.route[i], f.client[i] = route, client
	}
	return tlsReload{accepted: ok, err: failure, notices: notices}
}

func reloadNotices(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if _, n, ok := strings.Cut(l, "Reloaded: "); ok {
			out = append(out, n)
		}
	}
	return out
}

// ---- logs ----

func logPath(s *natsServer) string { return filepath.Join(s.local.Dir, "server.log") }

func logSize(t testing.TB, s *natsServer) int64 {
	t.Helper()
	fi, err := os.Stat(logPath(s))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func logFrom(t testing.TB, s *natsServer, from int64) string {
	t.Helper()
	b, err := os.ReadFile(logPath(s))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) < from {
		return ""
	}
	return string(b[from:])
}

var (
	tlsAddrRE   = regexp.MustCompile(`\[?[0-9a-f:.]*\d+\.\d+\.\d+\.\d+\]?(:\d+)?`)
	tlsDetailRE = regexp.MustCompile(` \([^()]*SHA-256: [0-9a-f]+[^()]*\)$`)
	tlsConnRE   = regexp.MustCompile(`^<addr> - (rid|cid):\d+ - `)
)

// normalizeTLSError drops what differs between runs: addresses and the
// certificate fingerprints nats-server appends.
func normalizeTLSError(e string) string {
	e = tlsDetailRE.ReplaceAllString(strings.TrimSpace(e), "")
	e = tlsAddrRE.ReplaceAllString(e, "<addr>")
	return tlsConnRE.ReplaceAllString(e, "")
}

// tlsLogLines are the distinct texts after marker in the log, normalized.
func tlsLogLines(log, marker string) []string {
	seen := map[string]bool{}
	for _, l := range strings.Split(log, "\n") {
		if _, e, ok := strings.Cut(l, marker); ok {
			seen[normalizeTLSError(e)] = true
		}
	}
	out := make([]string, 0, len(seen))
	for e := range seen {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

const routeHandshakeError = "TLS route handshake error: "

// waitForLog polls the servers' logs from the offsets until one holds
// marker, and returns the distinct texts after it across them.
func waitForLog(t testing.TB, servers []*natsServer, from []int64, marker string, wait time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		var all []string
		for i, s := range servers {
			all = append(all, tlsLogLines(logFrom(t, s, from[i]), marker)...)
		}
		if len(all) > 0 || time.Now().After(deadline) {
			slices.Sort(all)
			return slices.Compact(all)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ---- monitoring ----

// tlsVarz is what the matrix reads of /varz; raw is all of it.
type tlsVarz struct {
	ServerID        string    `json:"server_id"`
	TLSRequired     bool      `json:"tls_required"`
	TLSVerify       bool      `json:"tls_verify"`
	TLSTimeout      float64   `json:"tls_timeout"`
	TLSCertNotAfter time.Time `json:"tls_cert_not_after"`
	ConfigLoadTime  time.Time `json:"config_load_time"`
	ConfigDigest    string    `json:"config_digest"`
	Cluster         struct {
		TLSRequired     bool      `json:"tls_required"`
		TLSVerify       bool      `json:"tls_verify"`
		TLSTimeout      float64   `json:"tls_timeout"`
		TLSCertNotAfter time.Time `json:"tls_cert_not_after"`
	} `json:"cluster"`
	raw map[string]any
}

func readTLSVarz(s *natsServer) (tlsVarz, error) {
	var v tlsVarz
	b, err := s.get("/varz")
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, err
	}
	return v, json.Unmarshal(b, &v.raw)
}

// varzRuntime are the /varz fields that move without any reload (counters,
// clocks, usage, connection counts), left out of varzChanged.
var varzRuntime = []string{"now", "uptime", "mem", "cpu", "connections", "total_connections", "routes", "remotes", "leafnodes",
	"in_msgs", "out_msgs", "in_bytes", "out_bytes", "in_client_msgs", "in_client_bytes", "out_client_msgs", "out_client_bytes",
	"slow_consumers", "stale_connections", "stalled_clients", "subscriptions", "http_req_stats", "slow_consumer_stats",
	"stale_connection_stats", "disk_io_wait_stats", "ocsp_peer_cache", "pinned_account_fails", "jetstream.stats", "jetstream.meta"}

// varzFlat is /varz as leaf paths ("cluster.tls_cert_not_after") to their
// JSON values, runtime fields left out.
func varzFlat(raw map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		for _, r := range varzRuntime {
			if prefix == r || strings.HasPrefix(prefix, r+".") {
				return
			}
		}
		if m, ok := v.(map[string]any); ok {
			for k, x := range m {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, x)
			}
			return
		}
		b, _ := json.Marshal(v)
		out[prefix] = string(b)
	}
	walk("", raw)
	return out
}

// varzChanged are the non-runtime /varz fields that differ, sorted.
func varzChanged(before, after tlsVarz) []string {
	b, a := varzFlat(before.raw), varzFlat(after.raw)
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// routeConn is one route connection as /routez shows it.
type routeConn struct {
	Rid        uint64    `json:"rid"`
	RemoteName string    `json:"remote_name"`
	Start      time.Time `json:"start"`
}

// routeConnections is every route connection of the servers, each as
// "server->remote rid start": the same set before and after means no route
// was closed or opened.
func routeConnections(servers []*natsServer) []string {
	var out []string
	for _, s := range servers {
		b, err := s.get("/routez")
		if err != nil {
			out = append(out, s.name()+": "+err.Error())
			continue
		}
		var rz struct {
			Routes []routeConn `json:"routes"`
		}
		if err := json.Unmarshal(b, &rz); err != nil {
			out = append(out, s.name()+": "+err.Error())
			continue
		}
		for _, r := range rz.Routes {
			out = append(out, fmt.Sprintf("%s->%s %d %s", s.name(), r.RemoteName, r.Rid, r.Start.Format(time.RFC3339Nano)))
		}
	}
	sort.Strings(out)
	return out
}

// settledRouteConnections polls routeConnections until two reads a second
// apart agree, at most wait: once every server routes to every other, the
// rest of each route pool and the pinned system account route still
// connect, and duplicate routes are closed.
func settledRouteConnections(servers []*natsServer, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	last := routeConnections(servers)
	for {
		time.Sleep(time.Second)
		cur := routeConnections(servers)
		if slices.Equal(cur, last) || time.Now().After(deadline) {
			return cur
		}
		last = cur
	}
}

// routesChanged says which route connections closed (-) and opened (+)
// between two routeConnections; "" for none.
func routesChanged(before, after []string) string {
	var out []string
	for _, r := range before {
		if !slices.Contains(after, r) {
			out = append(out, "-"+r)
		}
	}
	for _, r := range after {
		if !slices.Contains(before, r) {
			out = append(out, "+"+r)
		}
	}
	return strings.Join(out, ", ")
}

// ---- probes ----

// routeProbe is what a TLS connection to a server's cluster port, as a
// route would open it, got.
type routeProbe struct {
	// peer is the certificate the server presented (nil: none).
	peer *x509.Certificate
	// info is the server's first line once the handshake is done.
	info string
	// err is where the connection failed ("" for none).
	err string
}

// probeRoute opens a TLS connection to server l's cluster port trusting
// roots, presenting cert when not nil, and reads the server's first line.
// A refusal of the client certificate arrives (TLS 1.3) as an alert on that
// read.
func probeRoute(l rendertest.Local, roots *x509.CertPool, cert *tls.Certificate) routeProbe {
	cfg := &tls.Config{RootCAs: roots}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(l.Host, strconv.Itoa(l.ClusterPort)), cfg)
	if err != nil {
		return routeProbe{err: normalizeTLSError(err.Error())}
	}
	defer conn.Close()
	var p routeProbe
	if pc := conn.ConnectionState().PeerCertificates; len(pc) > 0 {
		p.peer = pc[0]
	}
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		p.err = normalizeTLSError(err.Error())
	}
	p.info, _, _ = strings.Cut(line, " ")
	return p
}

// plainProbe is what a plain TCP connection to a port got.
type plainProbe struct {
	// received is what the server sent, up to 4096 bytes.
	received string
	// closed: the server closed the connection before the wait ran out.
	closed bool
	// after is how long the server took to close it, rounded to seconds.
	after time.Duration
}

// probePlain connects to host:port without TLS, sends send, and reads until
// the server closes the connection or the wait runs out.
func probePlain(host string, port int, send string, wait time.Duration) (plainProbe, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), 3*time.Second)
	if err != nil {
		return plainProbe{}, err
	}
	defer conn.Close()
	start := time.Now()
	if send != "" {
		if _, err := conn.Write([]byte(send)); err != nil {
			return plainProbe{}, err
		}
	}
	_ = conn.SetReadDeadline(start.Add(wait))
	var got bytes.Buffer
	buf := make([]byte, 1024)
	var p plainProbe
	for {
		n, err := conn.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			var ne net.Error
			p.closed = !(errors.As(err, &ne) && ne.Timeout()) && (errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset"))
			break
		}
	}
	p.after = time.Since(start).Round(time.Second)
	r := got.String()
	if len(r) > 4096 {
		r = r[:4096]
	}
	p.received = r
	return p, nil
}

// ---- writes ----

// tlsWriter publishes to the matrix stream through one server without a
// pause, to see whether a change makes writes wait.
type tlsWriter struct {
	stop, done chan struct{}
	mu         sync.Mutex
	acks       []time.Time
	errs       []string
}

func startTLSWriter(t testing.TB, s *natsServer) *tlsWriter {
	t.Helper()
	nc, js, err := connect(s)
	if err != nil {
		t.Fatalf("connecting the writer to %s: %v", s.name(), err)
	}
	w := &tlsWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer nc.Close()
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_, err := js.Publish(streamSubject, []byte("writer"))
			w.mu.Lock()
			if err == nil {
				w.acks = append(w.acks, time.Now())
			} else {
				w.errs = append(w.errs, err.Error())
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.finish)
	return w
}

func (w *tlsWriter) finish() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// mark is the writer's position, for gap.
func (w *tlsWriter) mark() (int, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.errs), time.Now()
}

// since is the longest time between acknowledged writes from t until now,
// and how many writes failed since the mark.
func (w *tlsWriter) since(errsAt int, from time.Time) (gap time.Duration, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := from
	for _, a := range w.acks {
		if a.Before(from) {
			continue
		}
		gap = max(gap, a.Sub(last))
		last = a
	}
	gap = max(gap, time.Since(last))
	return gap.Round(10 * time.Millisecond), len(w.errs) - errsAt
}

func (w *tlsWriter) acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acks)
}

// ---- stage observations ----

// routedPairs are the pairs of servers ("0-1") that route to each other.
func routedPairs(servers []*natsServer) []string {
	var out []string
	to := make([]map[string]bool, len(servers))
	for i, s := range servers {
		to[i] = s.routedTo()
	}
	for i := range servers {
		for j := i + 1; j < len(servers); j++ {
			if to[i][servers[j].name()] && to[j][servers[i].name()] {
				out = append(out, fmt.Sprintf("%d-%d", i, j))
			}
		}
	}
	return out
}

// tlsWritesThrough are the servers a write to the stream is acknowledged
// through, each tried once; the others' errors, by server.
func tlsWritesThrough(servers []*natsServer, acked *int) (ok []int, failed map[int]string) {
	failed = map[int]string{}
	for i, s := range servers {
		nc, js, err := connect(s)
		if err == nil {
			_, err = js.Publish(streamSubject, []byte("stage"))
			nc.Close()
		}
		if err != nil {
			failed[i] = err.Error()
			continue
		}
		*acked++
		ok = append(ok, i)
	}
	return ok, failed
}

// errorsSince are the distinct [ERR] texts each server logged from the
// offsets, without route dial failures to a server that is down.
func errorsSince(t testing.TB, servers []*natsServer, from []int64) [][]string {
	out := make([][]string, len(servers))
	for i, s := range servers {
		for _, e := range tlsLogLines(logFrom(t, s, from[i]), "[ERR] ") {
			if !strings.Contains(e, "connection refused") {
				out[i] = append(out[i], e)
			}
		}
	}
	return out
}

func containsText(list []string, text string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, text) })
}

// ---- case 1: route TLS on and off by restart ----

// routeTLSStage is one stage of a rolling restart that changes route TLS.
type routeTLSStage struct {
	name string
	// observed is the stage as the route matrix marks it (R M W).
	observed stage
	// routed are the pairs that route to each other; writable the servers a
	// write is acknowledged through (writeErrs: the others').
	routed    []string
	writable  []int
	writeErrs map[int]string
	// errors are the [ERR] texts each server logged during the stage.
	errors [][]string
}

// routeTLSRollout is what a rolling restart that changes route TLS did: its
// stages, and whether the stream kept all acked messages once all agree.
type routeTLSRollout struct {
	stages [3]routeTLSStage
	acked  int
	kept   bool
}

// TestTLSRouteRollout: route TLS turned on (and off) by restarting the
// servers one at a time, 3 servers with an R3 stream, measured with
// nats-server 2.15.2.
//
// Measured: the cluster splits at both mixed stages and heals once all
// servers agree. A route is TLS from its first byte (createRoute runs
// doTLSHandshake before any INFO when routeInfo.TLSRequired), so a TLS
// server and a plain one never route: the TLS server logs "TLS route
// handshake error: tls: first record does not look like a TLS handshake"
// for the plain server's INFO, and the plain server logs "authentication
// error" for the TLS ClientHello where it wants a CONNECT (a route accepted
// expects CONNECT first). At 2 old + 1 new only servers 0-1 route to each
// other; the restarted server 2 is alone, sees no meta leader and takes no
// writes, while the two others keep the meta and stream quorum and take
// writes. At 1 old + 2 new it is 1-2, with server 0 alone. Once all three
// run the new config, the mesh, the meta group and the stream are whole and
// every acknowledged message is there. Either direction: route TLS on or off
// is a change that splits the cluster for the rollout's middle stages
// (quorum stays with the majority side), without resetting JetStream.
func TestTLSRouteRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	t.Parallel()
	for _, c := range []struct {
		name, cluster string
		from, to      bool
	}{{"off to on", "rton", false, true}, {"on to off", "rtoff", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newTLSFixture(t, c.cluster, tlsFixtureOptions{servers: 3, jetStream: true})
			f.setUpRouteTLS()
			old, new := f.runs(c.from), f.runs(c.to)
			for i, s := range f.servers {
				s.start(t, old[i])
			}
			acked := 0
			if st := observeStage(f.servers, false, &acked, 60*time.Second); !st.ok() {
				t.Fatalf("the cluster did not form on the old config: %s (%s)", st, st.detail)
			}
			acked = createStream(t, f.servers[0])
			var found routeTLSRollout
			for k, idx := range []int{2, 1, 0} {
				from := logSizes(f.servers)
				f.servers[idx].stop()
				f.servers[idx].start(t, new[idx])
				st := &found.stages[k]
				st.name = []string{"2 old + 1 new", "1 old + 2 new", "all new"}[k]
				st.observed = observeStage(f.servers, k < 2, &acked, 20*time.Second)
				st.routed = routedPairs(f.servers)
				if k < 2 {
					st.writable, st.writeErrs = tlsWritesThrough(f.servers, &acked)
				}
				st.errors = errorsSince(t, f.servers, from)
			}
			kept, writable := streamStillThere(f.servers, acked, 30*time.Second)
			found.acked, found.kept = acked, kept
			found.stages[2].observed.streamApplies, found.stages[2].observed.writable = true, writable

			for _, st := range found.stages {
				t.Logf("%s: %s, routed %v", st.name, st.observed, st.routed)
				if st.writeErrs != nil {
					t.Logf("  writes acknowledged through %v, refused: %v", st.writable, st.writeErrs)
				}
				for i, e := range st.errors {
					t.Logf("  server %d logged %q", i, e)
				}
			}
			t.Logf("all new: the stream kept every acknowledged message (%d): %t", acked, kept)

			// 2 old + 1 new: 0-1 route, 2 is alone; 1 old + 2 new: 1-2 route, 0 alone.
			for k, want := range []struct {
				routed   []string
				writable []int
				alone    int
			}{{[]string{"0-1"}, []int{0, 1}, 2}, {[]string{"1-2"}, []int{1, 2}, 0}} {
				st := found.stages[k]
				if st.observed.ok() {
					t.Errorf("%s: the cluster is whole (%s); a TLS and a plain server must not route", st.name, st.observed)
				}
				if !slices.Equal(st.routed, want.routed) {
					t.Errorf("%s: routed pairs %v, want %v", st.name, st.routed, want.routed)
				}
				if !slices.Equal(st.writable, want.writable) {
					t.Errorf("%s: writes acknowledged through %v, want %v (the majority side)", st.name, st.writable, want.writable)
				}
				for i, e := range st.errors {
					// Servers 2 and (at the second stage) 1 run the new config.
					routeTLS := c.from
					if i > 2-k-1 {
						routeTLS = c.to
					}
					if want := map[bool]string{true: routeHandshakeError + "tls: first record does not look like a TLS handshake", false: "authentication error"}[routeTLS]; !containsText(e, want) {
						t.Errorf("%s: server %d (route TLS %t) logged %q, want %q among it", st.name, i, routeTLS, e, want)
					}
				}
			}
			if !found.stages[2].observed.ok() || !slices.Equal(found.stages[2].routed, []string{"0-1", "0-2", "1-2"}) {
				t.Errorf("all new: the cluster is not whole: %s (%s), routed %v", found.stages[2].observed, found.stages[2].observed.detail, found.stages[2].routed)
			}
			if !kept {
				t.Errorf("all new: the stream lost acknowledged messages (%d acknowledged)", acked)
			}
		})
	}
}

// ---- case 2: route TLS on and off by reload ----

// routeReloadStep is what one server's reload of route TLS did.
type routeReloadStep struct {
	server int
	reload tlsReload
	// settled is the cluster after the reload (R M W).
	settled stage
	// routesKept: every route connection of the cluster is the one from
	// before the reload (same rid and start time); no route reconnected.
	// routesChange lists those that did otherwise (routesChanged).
	routesKept   bool
	routesChange string
	// varzTLSRequired and varzCertNotAfter are /varz cluster.tls_required
	// and cluster.tls_cert_not_after after the reload.
	varzTLSRequired  bool
	varzCertNotAfter time.Time
	// plain is a plain TCP connection to the reloaded server's cluster port
	// sending a route CONNECT; tls one opening TLS with a client certificate.
	plain plainProbe
	tls   routeProbe
	// errors is what the reloaded server logged from the reload on.
	errors []string
}

// TestTLSRouteReload: route TLS turned on (and off) by a config reload
// (SIGHUP), one server at a time, 3 servers with an R3 stream.
//
// Measured: nats-server accepts the cluster tls block added or removed by
// reload ("Reloaded: cluster"): the whole cluster block is one
// clusterOption (reload.go diffOptions; validateClusterOpts refuses only
// another cluster host or port), whose Apply sets routeInfo.TLSRequired and
// closes no route. So the mesh, the meta group and the stream hold at every
// stage, and every route connection stays the very one from before the
// first reload (same rid and start): the routes stay plaintext (or TLS)
// until they reconnect. Only new connections see the change: right after
// its reload a server refuses a plain route connection (the connection is
// closed without a byte, "TLS route handshake error: tls: first record does
// not look like a TLS handshake") and completes a TLS one with its
// certificate, or the other way around when turned off. A route that
// reconnects between a reloaded and a not yet reloaded server cannot form
// (TestTLSRouteRollout), so the mixed stages are fragile while they last.
// Once every server has reloaded, a rolling restart on the same configs
// stays settled at every stage, and afterwards no route from before is
// left: reload everywhere, then restart one at a time, changes route TLS
// without a split.
// /varz cluster.tls_required does not follow the reload: it is set where
// /varz is first built (monitor.go createVarz) and
// updateVarzConfigReloadableFields does not refresh it, while
// cluster.tls_cert_not_after (refreshed there) does.
func TestTLSRouteReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	t.Parallel()
	for _, c := range []struct {
		name, cluster string
		from, to      bool
	}{{"on by reload", "rlon", false, true}, {"off by reload", "rloff", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newTLSFixture(t, c.cluster, tlsFixtureOptions{servers: 3, jetStream: true})
			f.setUpRouteTLS()
			block := func(i int, on bool) *tlsBlock {
				if on {
					return f.routeBlock(i, true)
				}
				return nil
			}
			for i := range f.servers {
				f.route[i] = block(i, c.from)
			}
			f.startAll()
			acked := createStream(t, f.servers[0])
			first := settledRouteConnections(f.servers, 30*time.Second)
			user := f.user.pair(t)
			var steps []routeReloadStep
			for _, idx := range []int{2, 1, 0} {
				s := f.servers[idx]
				from := logSize(t, s)
				before := routeConnections(f.servers)
				st := routeReloadStep{server: idx, reload: f.reloadSignal(idx, block(idx, c.to), nil)}
				if !st.reload.accepted {
					t.Fatalf("server %d refused to reload: %s", idx, st.reload.err)
				}
				st.settled = observeStage(f.servers, true, &acked, 20*time.Second)
				after := routeConnections(f.servers)
				st.routesKept, st.routesChange = slices.Equal(after, before), routesChanged(before, after)
				if v, err := readTLSVarz(s); err == nil {
					st.varzTLSRequired, st.varzCertNotAfter = v.Cluster.TLSRequired, v.Cluster.TLSCertNotAfter
				}
				var err error
				st.plain, err = probePlain(s.local.Host, s.local.ClusterPort, `CONNECT {"verbose":false,"pedantic":false,"tls_required":false}`+"\r\n", 10*time.Second)
				if err != nil {
					t.Fatalf("plain probe of server %d: %v", idx, err)
				}
				st.tls = probeRoute(s.local, tlsPool(f.ca), &user)
				time.Sleep(300 * time.Millisecond) // the server logs the probes' ends
				st.errors = tlsLogLines(logFrom(t, s, from), "[ERR] ")
				steps = append(steps, st)
			}
			last := routeConnections(f.servers)
			allKept := slices.Equal(last, first)

			// Then a rolling restart on the same configs: every route
			// reconnects as every server's config now says.
			var restarts [3]stage
			for k, idx := range []int{2, 1, 0} {
				f.restart(idx)
				restarts[k] = observeStage(f.servers, true, &acked, 30*time.Second)
			}
			renewed := settledRouteConnections(f.servers, 30*time.Second)
			kept, _ := streamStillThere(f.servers, acked, 30*time.Second)

			for _, st := range steps {
				peer := "none"
				if st.tls.peer != nil {
					peer = st.tls.peer.Subject.CommonName
				}
				t.Logf("reloaded server %d: %s; settled %s %s; routes kept %t; /varz cluster.tls_required=%t tls_cert_not_after=%s",
					st.server, st.reload, st.settled, st.settled.detail, st.routesKept, st.varzTLSRequired, st.varzCertNotAfter.Format(time.RFC3339))
				t.Logf("  plain route connection: received %.120q, closed %t after %s; TLS route connection: peer %s, first line %q, error %q",
					st.plain.received, st.plain.closed, st.plain.after, peer, st.tls.info, st.tls.err)
				t.Logf("  logged %q", st.errors)
			}
			t.Logf("after all reloads: every route is the connection from before the first: %t %s", allKept, routesChanged(first, last))
			t.Logf("then servers 2, 1, 0 restarted in turn: %v; a route from before the reloads left: %t; stream kept: %t",
				restarts, slices.ContainsFunc(renewed, func(r string) bool { return slices.Contains(first, r) }), kept)

			for _, st := range steps {
				if !slices.Contains(st.reload.notices, "cluster") {
					t.Errorf("server %d: reload notices %q, want \"cluster\"", st.server, st.reload.notices)
				}
				if !st.settled.ok() {
					t.Errorf("server %d: the cluster is not settled after the reload: %s (%s)", st.server, st.settled, st.settled.detail)
				}
				if !st.routesKept {
					t.Errorf("server %d: a route reconnected on the reload: %s", st.server, st.routesChange)
				}
				// Stale: /varz cluster.tls_required keeps the value of the start.
				if st.varzTLSRequired != c.from {
					t.Errorf("server %d: /varz cluster.tls_required %t after the reload, measured: it keeps %t from the start", st.server, st.varzTLSRequired, c.from)
				}
				if st.varzCertNotAfter.IsZero() == c.to {
					t.Errorf("server %d: /varz cluster.tls_cert_not_after %v with route TLS %t", st.server, st.varzCertNotAfter, c.to)
				}
				if c.to {
					if st.plain.received != "" || !st.plain.closed {
						t.Errorf("server %d: a plain route connection got %q (closed %t), want closed without a byte", st.server, st.plain.received, st.plain.closed)
					}
					if !containsText(st.errors, routeHandshakeError+"tls: first record does not look like a TLS handshake") {
						t.Errorf("server %d: logged %q, want the handshake error of the plain connection", st.server, st.errors)
					}
					if st.tls.peer == nil || !st.tls.peer.Equal(f.lastRouteLeaf[st.server].cert) || st.tls.info != "INFO" {
						t.Errorf("server %d: a TLS route connection got peer %v, first line %q (%s)", st.server, st.tls.peer, st.tls.info, st.tls.err)
					}
				} else {
					if !strings.HasPrefix(st.plain.received, "INFO ") {
						t.Errorf("server %d: a plain route connection got %q, want the route INFO", st.server, st.plain.received)
					}
					if st.tls.err == "" {
						t.Errorf("server %d: a TLS route connection to a plain cluster port succeeded", st.server)
					}
				}
			}
			if !allKept {
				t.Errorf("a route reconnected during the reloads: %s", routesChanged(first, last))
			}
			for k, st := range restarts {
				if !st.ok() {
					t.Errorf("restart %d after the reloads: not settled: %s (%s)", k, st, st.detail)
				}
			}
			if slices.ContainsFunc(renewed, func(r string) bool { return slices.Contains(first, r) }) {
				t.Errorf("after the rolling restart a route from before the reloads is left: %q", renewed)
			}
			if !kept {
				t.Errorf("the stream lost acknowledged messages")
			}
		})
	}
}

// ---- case 3: route certificate rotation by reload ----

// rotationStep is what one server's reload of rotated route TLS files did.
type rotationStep struct {
	step   string
	server int
	reload tlsReload
	// routesKept: no route connection of the cluster closed or opened;
	// routesChange: which did otherwise.
	routesKept   bool
	routesChange string
	// notAfter is /varz cluster.tls_cert_not_after after the reload; wantNotAfter
	// the expiry of the certificate in the server's files.
	notAfter, wantNotAfter time.Time
	// changed are the /varz fields the reload changed (varzChanged).
	changed []string
	// peer is the certificate a fresh TLS route connection got (nil: none);
	// isNew: it is the certificate in the server's files.
	peer  *x509.Certificate
	isNew bool
	// byOldCA and byNewCA: a fresh route connection presenting a client
	// certificate of the old (new) CA completed (got INFO); their errors.
	byOldCA, byNewCA       bool
	byOldCAErr, byNewCAErr string
	// settled is the cluster after the reload.
	settled stage
	// gap is the longest time between acknowledged writes of a writer
	// through server 0 from just before the reload to after settling, failed
	// its failed writes.
	gap    time.Duration
	failed int
}

// TestTLSRouteRotation: route certificates rotated by rewriting the files in
// place and reloading ($SYS.REQ.SERVER.<id>.RELOAD as the controller's
// system user), one server at a time, 3 servers with an R3 stream and a
// writer publishing through server 0 all along.
//
// Measured, in four steps applied to servers 2, 1, 0 in turn: a new server
// certificate of the same CA; the CA file as a bundle of the old and a new
// CA; server certificates of the new CA; the new CA only. Every reload is
// accepted with nothing in the config file changed ("Reloaded: cluster":
// the cluster TLS config is built anew from the files on every reload, and
// reflect.DeepEqual of two tls.Configs never holds, reload.go diffOptions),
// no route connection closes or opens, and writes do not stop (the longest
// gap between acknowledged writes stays at the writer's own pace, no write
// fails; logged, not asserted). Right after each reload a fresh TLS
// connection to the server's cluster port gets the certificate now in its
// files, and the server takes exactly the client certificates its new CA
// file trusts: both CAs with the bundle, only the new one at the end (a
// certificate of a CA the server does not name is not even sent by a Go
// TLS client: "remote error: tls: certificate required"). /varz shows the
// rotation only as cluster.tls_cert_not_after (the expiry of the
// certificate in the files, monitor.go tlsCertNotAfter, refreshed on reload
// by updateVarzConfigReloadableFields) and config_load_time; a CA change
// shows only as config_load_time; config_digest never changes, since the
// config file did not. With the new CA everywhere, server 1 restarted routes
// to the others again: the new material works for routes both ways. A
// reload that makes server 2 trust only a CA none of its peers' certificates
// come from is accepted too and keeps the existing routes up, hiding the
// breakage: the next route that connects (server 1 restarted) cannot form;
// server 2 logs "TLS route handshake error: tls: failed to verify
// certificate: x509: certificate signed by unknown authority" (dialing 1)
// and "tls: client didn't provide a certificate" (dialed by 1), server 1
// "TLS route handshake error: remote error: tls: bad certificate".
// Server 2 reloaded to trust the new CA again heals it: the mesh is whole
// and the stream holds every acknowledged message.
func TestTLSRouteRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	t.Parallel()
	f := newTLSFixture(t, "rot", tlsFixtureOptions{servers: 3, jetStream: true, systemUser: true})
	f.setUpRouteTLS()
	for i := range f.servers {
		f.route[i] = f.routeBlock(i, true)
	}
	f.startAll()
	acked := createStream(t, f.servers[0])
	w := startTLSWriter(t, f.servers[0])
	settledRouteConnections(f.servers, 30*time.Second)

	oldCA, newCA := f.ca, newTLSCA(t, "rot-ca-2")
	certVarz, caVarz := []string{"cluster.tls_cert_not_after", "config_load_time"}, []string{"config_load_time"}
	byOld := f.user.pair(t)
	byNew := newCA.issue(t, leafSpec{name: "client-user-2", notAfter: f.nextNotAfter(), usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}).pair(t)
	both := tlsPool(oldCA, newCA)

	steps := []struct {
		name    string
		prepare func(i int)
		// trusts: which client CAs the server trusts after the step.
		trustsOld, trustsNew bool
		// varz are the /varz fields the step changes.
		varz []string
	}{
		{"new certificate, same CA", func(i int) { f.writeRouteCert(i, f.serverLeaf(oldCA, i, nil)) }, true, false, certVarz},
		{"CA bundle old + new", func(i int) { f.writeRouteCA(i, oldCA, newCA) }, true, true, caVarz},
		{"certificates of the new CA", func(i int) { f.writeRouteCert(i, f.serverLeaf(newCA, i, nil)) }, true, true, certVarz},
		{"new CA only", func(i int) { f.writeRouteCA(i, newCA) }, false, true, caVarz},
	}
	var found []rotationStep
	for _, step := range steps {
		for _, idx := range []int{2, 1, 0} {
			s := f.servers[idx]
			before, err := readTLSVarz(s)
			if err != nil {
				t.Fatal(err)
			}
			routes := routeConnections(f.servers)
			errsAt, from := w.mark()
			step.prepare(idx)
			st := rotationStep{step: step.name, server: idx, reload: f.reloadSys(idx, f.route[idx], nil)}
			after := routeConnections(f.servers)
			st.routesKept, st.routesChange = slices.Equal(after, routes), routesChanged(routes, after)
			if after, err := readTLSVarz(s); err == nil {
				st.notAfter, st.changed = after.Cluster.TLSCertNotAfter, varzChanged(before, after)
			}
			st.wantNotAfter = f.lastRouteLeaf[idx].cert.NotAfter
			p := probeRoute(s.local, both, &byOld)
			st.peer, st.byOldCA, st.byOldCAErr = p.peer, p.info == "INFO", p.err
			st.isNew = p.peer != nil && p.peer.Equal(f.lastRouteLeaf[idx].cert)
			p = probeRoute(s.local, both, &byNew)
			st.byNewCA, st.byNewCAErr = p.info == "INFO", p.err
			st.settled = observeStage(f.servers, true, &acked, 20*time.Second)
			st.gap, st.failed = w.since(errsAt, from)
			found = append(found, st)
		}
	}

	// A fresh mesh on the new material: server 1 restarted.
	f.restart(1)
	fresh := observeStage(f.servers, true, &acked, 60*time.Second)

	// The wrong order: server 2 made to trust only a CA of no peer.
	otherCA := newTLSCA(t, "rot-ca-other")
	routes := settledRouteConnections(f.servers, 30*time.Second)
	f.writeRouteCA(2, otherCA)
	wrong := f.reloadSys(2, f.route[2], nil)
	afterWrong := routeConnections(f.servers)
	wrongKept := slices.Equal(afterWrong, routes)
	p := probeRoute(f.servers[2].local, both, &byNew)
	from := logSizes(f.servers)
	f.restart(1)
	wrongErrs := waitForLog(t, f.servers, from, routeHandshakeError, 30*time.Second)
	time.Sleep(2 * time.Second) // a few more attempts, on both sides
	wrongLogged := errorsSince(t, f.servers, from)
	wrongRouted := routedPairs(f.servers)
	w.finish()
	// Healed before the stream is counted: server 2 trusts the new CA
	// again. With 1-2 unrouted, 1 and 2 do not hear each other, so the
	// stream's Raft group can keep electing and its info not answer
	// within the wait (seen once in CI, on a loaded machine), which says
	// nothing of a loss; the stream once the mesh is whole again does.
	f.writeRouteCA(2, newCA)
	healReload := f.reloadSys(2, f.route[2], nil)
	healed := observeStage(f.servers, true, &acked, 60*time.Second)
	kept, _ := streamStillThere(f.servers, acked+w.acked(), 30*time.Second)

	for _, st := range found {
		t.Logf("%s, server %d: %s; routes kept %t; /varz cluster.tls_cert_not_after %s (files: %s); /varz changed %q",
			st.step, st.server, st.reload, st.routesKept, st.notAfter.Format(time.RFC3339), st.wantNotAfter.Format(time.RFC3339), st.changed)
		issuer := "none"
		if st.peer != nil {
			issuer = st.peer.Issuer.CommonName
		}
		t.Logf("  fresh route connection: the certificate in the files %t (issuer %s); client certificate of the old CA accepted %t %s, of the new CA %t %s",
			st.isNew, issuer, st.byOldCA, st.byOldCAErr, st.byNewCA, st.byNewCAErr)
		t.Logf("  settled %s %s; writes through server 0: longest gap %s, %d failed", st.settled, st.settled.detail, st.gap, st.failed)
	}
	t.Logf("server 1 restarted on the new CA: %s %s", fresh, fresh.detail)
	t.Logf("server 2 reloaded to trust only an unrelated CA: %s; routes kept %t; a route connection with a certificate of the new CA: first line %q, error %q",
		wrong, wrongKept, p.info, p.err)
	t.Logf("  then server 1 restarted: routed %v; handshake errors %q", wrongRouted, wrongErrs)
	for i, e := range wrongLogged {
		t.Logf("  server %d logged %q", i, e)
	}
	t.Logf("server 2 reloaded to trust the new CA again: %s; then %s %s", healReload, healed, healed.detail)
	t.Logf("stream kept every acknowledged message: %t", kept)

	for k, st := range found {
		step := steps[k/3]
		if !st.reload.accepted || !slices.Contains(st.reload.notices, "cluster") {
			t.Errorf("%s, server %d: %s, want accepted with \"cluster\"", st.step, st.server, st.reload)
		}
		if !st.routesKept {
			t.Errorf("%s, server %d: a route reconnected on the reload: %s", st.step, st.server, st.routesChange)
		}
		if !st.notAfter.Equal(st.wantNotAfter) {
			t.Errorf("%s, server %d: /varz cluster.tls_cert_not_after %v, the certificate in the files expires %v", st.step, st.server, st.notAfter, st.wantNotAfter)
		}
		if !slices.Equal(st.changed, step.varz) {
			t.Errorf("%s, server %d: /varz changed %q, want exactly %q", st.step, st.server, st.changed, step.varz)
		}
		if !st.isNew {
			t.Errorf("%s, server %d: a fresh route connection did not get the certificate in the files: %v", st.step, st.server, st.peer)
		}
		if st.byOldCA != step.trustsOld || st.byNewCA != step.trustsNew {
			t.Errorf("%s, server %d: client certificates accepted: old CA %t (%s), new CA %t (%s); want %t, %t",
				st.step, st.server, st.byOldCA, st.byOldCAErr, st.byNewCA, st.byNewCAErr, step.trustsOld, step.trustsNew)
		}
		if !st.settled.ok() {
			t.Errorf("%s, server %d: not settled after the reload: %s (%s)", st.step, st.server, st.settled, st.settled.detail)
		}
	}
	if !fresh.ok() {
		t.Errorf("server 1 restarted on the new CA does not rejoin: %s (%s)", fresh, fresh.detail)
	}
	if !wrong.accepted || !wrongKept {
		t.Errorf("trusting an unrelated CA: %s, routes kept %t (%s); want accepted, routes kept", wrong, wrongKept, routesChanged(routes, afterWrong))
	}
	if p.info == "INFO" {
		t.Errorf("server 2 trusting only an unrelated CA completed a route connection with a certificate of the new CA")
	}
	if slices.Contains(wrongRouted, "1-2") || !slices.Contains(wrongRouted, "0-1") {
		t.Errorf("after server 1 restarted: routed %v, want 0-1 and not 1-2", wrongRouted)
	}
	if !containsText(wrongLogged[2], routeHandshakeError+"tls: failed to verify certificate: x509: certificate signed by unknown authority") {
		t.Errorf("server 2, trusting only an unrelated CA, logged %q, want the unknown authority of its peer's certificate", wrongLogged[2])
	}
	if !containsText(wrongLogged[1], routeHandshakeError) {
		t.Errorf("server 1 logged %q, want a route handshake error", wrongLogged[1])
	}
	if !healReload.accepted || !healed.ok() {
		t.Errorf("server 2 trusting the new CA again: %s; the cluster %s (%s), want accepted and whole again", healReload, healed, healed.detail)
	}
	if !kept {
		t.Errorf("the stream lost acknowledged messages")
	}
}

// ---- case 4: client TLS by reload ----

// clientTLSStep is what one server's reload of client TLS did.
type clientTLSStep struct {
	step   string
	server int
	reload tlsReload
	// varz is /varz after the reload; changed the fields the reload changed.
	varz    tlsVarz
	changed []string
	// plainClient is the error of a nats.go client without TLS options,
	// tlsClient of one trusting the CA, certClient of one that also presents
	// a client certificate ("" = connected).
	plainClient, tlsClient, certClient string
	// peerIsNew: the TLS client got the certificate in the server's files,
	// which expires at wantNotAfter.
	peerIsNew    bool
	wantNotAfter time.Time
	// raw is a plain TCP client sending CONNECT and PING.
	raw plainProbe
	// existingPlain and existingTLS: a round trip (flush) of a plain client
	// connected before client TLS was on, and of a TLS client without a
	// client certificate connected before verify was on, both to server 2
	// ("" = fine; "." = not connected yet).
	existingPlain, existingTLS string
	// settled is the cluster after the reload (routes; no JetStream).
	settled stage
}

// TestTLSClientReload: client TLS (the top-level tls block) turned on by
// reload, then verify turned on, then the server certificate rotated in
// place, then a reload with nothing changed; each applied by
// $SYS.REQ.SERVER.<id>.RELOAD to servers 2, 1, 0 in turn, with route TLS on
// all along.
//
// Measured: every reload is accepted ("Reloaded: tls = enabled", reload.go
// tlsOption, and "Reloaded: cluster", since the cluster TLS config is
// rebuilt on every reload too); no route reconnects. After client TLS is on,
// the server still sends its INFO in plain text (now with tls_required), so
// a raw plain client gets the INFO and then the connection is closed when
// its CONNECT is no TLS ClientHello (the handshake error is logged only at
// debug level for clients). A nats.go client without TLS options upgrades on
// its own (nats.go checkForSecure) and fails "tls: failed to verify
// certificate: x509: certificate signed by unknown authority"; one trusting
// the CA connects. Connections made before stay up and keep working: the
// plain client connected before TLS was on, and the TLS client without a
// certificate connected before verify was on (tlsOption.Apply changes only
// server.info). With verify, a client without a certificate is refused
// ("remote error: tls: certificate required", or "connection closed by
// remote after TLS handshake" when the server closes first). /varz reports
// client TLS as tls_required, tls_verify, tls_timeout and tls_cert_not_after
// (the expiry of the certificate in the files, monitor.go tlsCertNotAfter),
// all refreshed on reload (updateVarzConfigReloadableFields); there is no
// serial or fingerprint. The exact /varz changes, runtime counters aside:
// turning TLS on changes config_digest, config_load_time, tls_required,
// tls_timeout, tls_cert_not_after and auth_timeout (the default auth timeout
// follows the TLS timeout: "Reloaded: authorization timeout = 6" with
// timeout 5); verify on changes config_digest, config_load_time and
// tls_verify; a rotation in place changes only config_load_time and
// tls_cert_not_after (the config file is the same, so config_digest is too);
// a reload with nothing changed only config_load_time. A rotation is
// confirmed per server by tls_cert_not_after equal to the new certificate's
// expiry (certificates must then differ in NotAfter), or by the certificate
// a fresh TLS connection gets.
func TestTLSClientReload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	t.Parallel()
	f := newTLSFixture(t, "cli", tlsFixtureOptions{servers: 3, systemUser: true})
	f.setUpRouteTLS()
	f.setUpClientTLS()
	for i := range f.servers {
		f.route[i] = f.routeBlock(i, true)
	}
	f.startAll()
	routes := settledRouteConnections(f.servers, 30*time.Second)
	plainOpts := []nats.Option{nats.Timeout(3 * time.Second), nats.NoReconnect(), nats.IgnoreDiscoveredServers()}
	existingPlain, err := nats.Connect(f.servers[2].url(), plainOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer existingPlain.Close()
	var existingTLS *nats.Conn
	defer func() {
		if existingTLS != nil {
			existingTLS.Close()
		}
	}()
	flush := func(nc *nats.Conn) string {
		if nc == nil {
			return "."
		}
		if err := nc.FlushTimeout(3 * time.Second); err != nil {
			return err.Error()
		}
		return ""
	}
	try := func(url string, opts ...nats.Option) (string, *nats.Conn) {
		nc, err := nats.Connect(url, opts...)
		if err != nil {
			return normalizeTLSError(err.Error()), nil
		}
		if err := nc.FlushTimeout(3 * time.Second); err != nil {
			nc.Close()
			return normalizeTLSError(err.Error()), nil
		}
		return "", nc
	}

	steps := []struct {
		name    string
		prepare func(i int)
		verify  bool
	}{
		{"client TLS on", nil, false},
		{"verify on", nil, true},
		{"certificate rotated in place", func(i int) { f.writeClientCert(i, f.serverLeaf(f.ca, i, nil)) }, true},
		{"nothing changed", nil, true},
	}
	var found []clientTLSStep
	for k, step := range steps {
		for _, idx := range []int{2, 1, 0} {
			s := f.servers[idx]
			before, err := readTLSVarz(s)
			if err != nil {
				t.Fatal(err)
			}
			if step.prepare != nil {
				step.prepare(idx)
			}
			st := clientTLSStep{step: step.name, server: idx, reload: f.reloadSys(idx, f.route[idx], f.clientBlock(idx, step.verify))}
			st.wantNotAfter = f.lastClientLeaf[idx].cert.NotAfter
			if st.varz, err = readTLSVarz(s); err == nil {
				st.changed = varzChanged(before, st.varz)
			}
			st.plainClient, _ = try(s.url(), plainOpts...)
			var nc *nats.Conn
			st.tlsClient, nc = try(s.url(), f.clientOptions(idx, false)...)
			if nc != nil {
				if cs, err := nc.TLSConnectionState(); err == nil && len(cs.PeerCertificates) > 0 {
					st.peerIsNew = cs.PeerCertificates[0].Equal(f.lastClientLeaf[idx].cert)
				}
				if k == 0 && idx == 2 {
					existingTLS = nc
				} else {
					nc.Close()
				}
			}
			if st.certClient, nc = try(s.url(), f.clientOptions(idx, true)...); nc != nil {
				if cs, err := nc.TLSConnectionState(); err == nil && len(cs.PeerCertificates) > 0 {
					st.peerIsNew = cs.PeerCertificates[0].Equal(f.lastClientLeaf[idx].cert)
				}
				nc.Close()
			}
			if st.raw, err = probePlain(s.local.Host, s.local.ClientPort, "CONNECT {\"verbose\":false}\r\nPING\r\n", 10*time.Second); err != nil {
				t.Fatal(err)
			}
			st.existingPlain, st.existingTLS = flush(existingPlain), flush(existingTLS)
			acked := 0
			st.settled = observeStage(f.servers, false, &acked, 10*time.Second)
			found = append(found, st)
		}
	}
	last := routeConnections(f.servers)
	routesKept := slices.Equal(last, routes)

	for _, st := range found {
		t.Logf("%s, server %d: %s; /varz tls_required=%t tls_verify=%t tls_timeout=%v tls_cert_not_after=%s; changed %q",
			st.step, st.server, st.reload, st.varz.TLSRequired, st.varz.TLSVerify, st.varz.TLSTimeout, st.varz.TLSCertNotAfter.Format(time.RFC3339), st.changed)
		raw, _, _ := strings.Cut(st.raw.received, " ")
		t.Logf("  client without TLS options: %q; trusting the CA: %q; with a certificate: %q; the certificate in the files: %t",
			st.plainClient, st.tlsClient, st.certClient, st.peerIsNew)
		t.Logf("  raw plain client: got %q... (%d bytes), closed %t after %s; existing plain client %q, existing TLS client %q; settled %s",
			raw, len(st.raw.received), st.raw.closed, st.raw.after, st.existingPlain, st.existingTLS, st.settled)
	}
	t.Logf("no route reconnected: %t %s", routesKept, routesChanged(routes, last))

	const unknownAuthority = "nats: tls error: tls: failed to verify certificate: x509: certificate signed by unknown authority"
	wantChanged := map[string][]string{
		"client TLS on":                {"auth_timeout", "config_digest", "config_load_time", "tls_cert_not_after", "tls_required", "tls_timeout"},
		"verify on":                    {"config_digest", "config_load_time", "tls_verify"},
		"certificate rotated in place": {"config_load_time", "tls_cert_not_after"},
		"nothing changed":              {"config_load_time"},
	}
	for _, st := range found {
		if !st.reload.accepted || !slices.Contains(st.reload.notices, "tls = enabled") {
			t.Errorf("%s, server %d: %s, want accepted with \"tls = enabled\"", st.step, st.server, st.reload)
		}
		if !slices.Equal(st.changed, wantChanged[st.step]) {
			t.Errorf("%s, server %d: /varz changed %q, want exactly %q", st.step, st.server, st.changed, wantChanged[st.step])
		}
		verify := st.step != "client TLS on"
		if !st.varz.TLSRequired || st.varz.TLSVerify != verify || !st.varz.TLSCertNotAfter.Equal(st.wantNotAfter) {
			t.Errorf("%s, server %d: /varz tls_required=%t tls_verify=%t tls_cert_not_after=%v, want true, %t, %v",
				st.step, st.server, st.varz.TLSRequired, st.varz.TLSVerify, st.varz.TLSCertNotAfter, verify, st.wantNotAfter)
		}
		if st.plainClient != unknownAuthority {
			t.Errorf("%s, server %d: a client without TLS options got %q, want %q", st.step, st.server, st.plainClient, unknownAuthority)
		}
		// Refused with verify: "remote error: tls: certificate required", or,
		// when the server closes first, "connection closed by remote after
		// TLS handshake".
		if refused := st.tlsClient != ""; refused != verify {
			t.Errorf("%s, server %d: a TLS client without a certificate got %q with verify %t", st.step, st.server, st.tlsClient, verify)
		}
		if st.certClient != "" || !st.peerIsNew {
			t.Errorf("%s, server %d: a TLS client with a certificate got %q, the certificate in the files %t", st.step, st.server, st.certClient, st.peerIsNew)
		}
		if !strings.HasPrefix(st.raw.received, "INFO ") || !strings.Contains(st.raw.received, `"tls_required":true`) || !st.raw.closed {
			t.Errorf("%s, server %d: a raw plain client got %.300q, closed %t; want the INFO with tls_required, then closed", st.step, st.server, st.raw.received, st.raw.closed)
		}
		if st.existingPlain != "" || (st.existingTLS != "" && st.existingTLS != ".") {
			t.Errorf("%s, server %d: existing clients: plain %q, TLS %q; want both working", st.step, st.server, st.existingPlain, st.existingTLS)
		}
		if !st.settled.ok() {
			t.Errorf("%s, server %d: not settled: %s (%s)", st.step, st.server, st.settled, st.settled.detail)
		}
	}
	if !routesKept {
		t.Errorf("a route reconnected on a client TLS reload: %s", routesChanged(routes, last))
	}
}

// ---- case 5: what monitoring shows of route TLS, and plain routes refused ----

// TestTLSRouteMonitoring: what /varz and /routez show of route TLS, and what
// a connection to a TLS cluster port that is no TLS route gets; 3 servers
// with route TLS (verify, timeout 5) from the start, no client TLS.
//
// Measured: /varz shows route TLS only in its cluster block: tls_required,
// tls_verify, tls_timeout and tls_cert_not_after (the expiry of the route
// certificate; monitor.go createVarz and tlsCertNotAfter); the top-level
// tls_* fields are client TLS and stay unset. /routez has no TLS field at
// all, neither per route (RouteInfo has no tls_version, tls_cipher_suite or
// certificate; only /connz shows those, for clients) nor at the top, so
// whether a given route connection is TLS cannot be read from monitoring.
// A plain TCP connection to the cluster port that sends a route CONNECT gets
// not a byte and is closed at once; the server logs "TLS route handshake
// error: tls: first record does not look like a TLS handshake" (client.go
// doTLSHandshake: route handshake errors are always logged as errors). One
// that sends nothing gets not a byte either (server.go tlsTimeout's "-ERR
// 'Secure Connection - TLS Required'" goes into the unfinished TLS
// connection) and is closed after the cluster tls timeout (5s here), logged
// as "TLS route handshake error: read tcp ...: i/o timeout" and/or "TLS
// handshake timeout" (the read deadline and the timer race). A TLS connection without a client certificate is
// refused although the config says verify (route TLS always requires and
// verifies client certificates: opts.go getTLSConfig): "remote error: tls:
// certificate required" at the client, "tls: client didn't provide a
// certificate" in the log. One presenting a certificate of another CA is
// refused the same way (a Go TLS client sends only a certificate of a CA the
// server asks for), one with a certificate of the CA gets the route INFO.
// Every one of these TLS connections sees the server's route certificate
// (TLS 1.3 refuses the client's certificate only after the client's side of
// the handshake is done), so a probe without a client certificate can read
// which certificate a server's cluster port presents.
func TestTLSRouteMonitoring(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	t.Parallel()
	f := newTLSFixture(t, "mon", tlsFixtureOptions{servers: 3})
	f.setUpRouteTLS()
	for i := range f.servers {
		f.route[i] = f.routeBlock(i, true)
	}
	f.startAll()
	s := f.servers[0]

	// routeMonitoringFindings is what server 0 shows and does.
	var found struct {
		// varz is its /varz; clusterTLS and topTLS the cluster.tls* and the
		// top-level tls* fields it has.
		varz               tlsVarz
		clusterTLS, topTLS []string
		// routes is how many routes /routez lists, routeFields the fields of
		// a route, routezTLS every /routez field naming TLS or a certificate.
		routes                 int
		routeFields, routezTLS []string
		// withConnect and silent are plain TCP connections to the cluster
		// port, one sending a route CONNECT, one nothing.
		withConnect, silent plainProbe
		// noCert, otherCA and good are TLS connections without a client
		// certificate, with one of another CA, and with one of the CA.
		noCert, otherCA, good routeProbe
		// logged is what the server logged of the probes.
		logged []string
	}
	var err error
	if found.varz, err = readTLSVarz(s); err != nil {
		t.Fatal(err)
	}
	for k := range varzFlat(found.varz.raw) {
		if strings.HasPrefix(k, "cluster.tls") {
			found.clusterTLS = append(found.clusterTLS, k)
		} else if strings.HasPrefix(k, "tls") {
			found.topTLS = append(found.topTLS, k)
		}
	}
	sort.Strings(found.clusterTLS)
	sort.Strings(found.topTLS)

	b, err := s.get("/routez")
	if err != nil {
		t.Fatal(err)
	}
	var rz map[string]any
	if err := json.Unmarshal(b, &rz); err != nil {
		t.Fatal(err)
	}
	tlsLike := func(k string) bool { return strings.Contains(k, "tls") || strings.Contains(k, "cert") }
	for k := range rz {
		if tlsLike(k) {
			found.routezTLS = append(found.routezTLS, k)
		}
	}
	routes, _ := rz["routes"].([]any)
	found.routes = len(routes)
	fields := map[string]bool{}
	for _, r := range routes {
		for k := range r.(map[string]any) {
			fields[k] = true
		}
	}
	for k := range fields {
		found.routeFields = append(found.routeFields, k)
		if tlsLike(k) {
			found.routezTLS = append(found.routezTLS, "routes[]."+k)
		}
	}
	sort.Strings(found.routeFields)

	from := logSizes(f.servers[:1])
	if found.withConnect, err = probePlain(s.local.Host, s.local.ClusterPort,
		`CONNECT {"verbose":false,"pedantic":false,"tls_required":false,"name":"mon-x","cluster":"mon"}`+"\r\n", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if found.silent, err = probePlain(s.local.Host, s.local.ClusterPort, "", 15*time.Second); err != nil {
		t.Fatal(err)
	}
	found.noCert = probeRoute(s.local, tlsPool(f.ca), nil)
	foreign := newTLSCA(t, "mon-other").issue(t, leafSpec{name: "foreign", notAfter: f.nextNotAfter()}).pair(t)
	found.otherCA = probeRoute(s.local, tlsPool(f.ca), &foreign)
	user := f.user.pair(t)
	found.good = probeRoute(s.local, tlsPool(f.ca), &user)
	time.Sleep(500 * time.Millisecond) // the server logs the probes' ends
	found.logged = errorsSince(t, f.servers[:1], from)[0]

	v := found.varz
	routeCert := f.lastRouteLeaf[0].cert
	t.Logf("/varz cluster TLS fields %q: tls_required=%t tls_verify=%t tls_timeout=%v tls_cert_not_after=%s (route certificate: %s); top-level tls fields %q",
		found.clusterTLS, v.Cluster.TLSRequired, v.Cluster.TLSVerify, v.Cluster.TLSTimeout, v.Cluster.TLSCertNotAfter.Format(time.RFC3339),
		routeCert.NotAfter.Format(time.RFC3339), found.topTLS)
	t.Logf("/routez: %d routes, fields of a route %q; TLS or certificate fields %q", found.routes, found.routeFields, found.routezTLS)
	t.Logf("plain TCP sending a route CONNECT: got %q, closed %t after %s", found.withConnect.received, found.withConnect.closed, found.withConnect.after)
	t.Logf("plain TCP sending nothing: got %q, closed %t after %s", found.silent.received, found.silent.closed, found.silent.after)
	for _, p := range []struct {
		what string
		p    routeProbe
	}{{"without a client certificate", found.noCert}, {"with a certificate of another CA", found.otherCA}, {"with a certificate of the CA", found.good}} {
		t.Logf("TLS %s: the server's certificate seen %t, first line %q, error %q", p.what, p.p.peer != nil && p.p.peer.Equal(routeCert), p.p.info, p.p.err)
	}
	t.Logf("server 0 logged %q", found.logged)

	if want := []string{"cluster.tls_cert_not_after", "cluster.tls_required", "cluster.tls_timeout", "cluster.tls_verify"}; !slices.Equal(found.clusterTLS, want) {
		t.Errorf("/varz cluster TLS fields %q, want %q", found.clusterTLS, want)
	}
	if !v.Cluster.TLSRequired || !v.Cluster.TLSVerify || v.Cluster.TLSTimeout != 5 || !v.Cluster.TLSCertNotAfter.Equal(routeCert.NotAfter) {
		t.Errorf("/varz cluster: tls_required=%t tls_verify=%t tls_timeout=%v tls_cert_not_after=%v", v.Cluster.TLSRequired, v.Cluster.TLSVerify, v.Cluster.TLSTimeout, v.Cluster.TLSCertNotAfter)
	}
	if want := []string{"tls_timeout"}; !slices.Equal(found.topTLS, want) || v.TLSRequired {
		t.Errorf("/varz top-level TLS fields %q (tls_required %t) without client TLS, want only %q", found.topTLS, v.TLSRequired, want)
	}
	if found.routes == 0 || len(found.routezTLS) != 0 {
		t.Errorf("/routez: %d routes, TLS fields %q; measured: none", found.routes, found.routezTLS)
	}
	if found.withConnect.received != "" || !found.withConnect.closed {
		t.Errorf("a plain route CONNECT got %q, closed %t; want closed without a byte", found.withConnect.received, found.withConnect.closed)
	}
	if found.silent.received != "" || !found.silent.closed {
		t.Errorf("a silent plain connection got %q, closed %t; want closed without a byte", found.silent.received, found.silent.closed)
	}
	if found.noCert.info == "INFO" || found.otherCA.info == "INFO" || found.good.info != "INFO" {
		t.Errorf("TLS route connections: without a certificate %q %q, of another CA %q %q, of the CA %q %q; want only the last to get INFO",
			found.noCert.info, found.noCert.err, found.otherCA.info, found.otherCA.err, found.good.info, found.good.err)
	}
	// The server's certificate is seen whatever the client presents: TLS 1.3
	// refuses the client certificate after the client's side is done.
	for _, p := range []routeProbe{found.noCert, found.otherCA, found.good} {
		if p.peer == nil || !p.peer.Equal(routeCert) {
			t.Errorf("a TLS route connection (error %q) did not see the route certificate", p.err)
		}
	}
	// The silent connection: the read deadline and the timeout timer are
	// set to the same time (doTLSHandshake); "TLS handshake timeout" is
	// logged when the timer goes first, the i/o timeout otherwise or too.
	if !containsText(found.logged, "TLS handshake timeout") && !containsText(found.logged, routeHandshakeError+"read tcp <addr>-><addr>: i/o timeout") {
		t.Errorf("server 0 logged %q, want the timeout of the silent connection", found.logged)
	}
	for _, want := range []string{
		routeHandshakeError + "tls: first record does not look like a TLS handshake",
		routeHandshakeError + "tls: client didn't provide a certificate",
	} {
		if !containsText(found.logged, want) {
			t.Errorf("server 0 logged %q, want %q among it", found.logged, want)
		}
	}
}

// ---- case 6: route hostname verification ----

// TestTLSRouteVerification: what a route certificate must hold when route
// URLs are IPs (as in the localized configs), 2 servers per case.
//
// Measured: the soliciting server verifies the accepting server's
// certificate against the host of the route URL (client.go doTLSHandshake
// sets ServerName from the URL; an IP goes to crypto/tls as is), so with IP
// route URLs the certificate must hold that IP as an IP SAN: with DNS SANs
// only the route fails with "x509: cannot validate certificate for <addr>
// because it doesn't contain any IP SANs", with another IP with
// "x509: certificate is valid for <addr>, not <addr>". Both ends present
// their certificate (the accepting end verifies the soliciting end's as a
// client certificate against its CA file, without any name check), so a
// route certificate must carry the client auth extended key usage too: with
// server auth only the route fails with "x509: certificate specifies an
// incompatible key usage" at the accepting end. verify: false changes nothing for routes: route
// TLS always requires and verifies client certificates (opts.go
// getTLSConfig forces tls.RequireAndVerifyClientCert), /varz still says
// cluster.tls_verify true, and a connection without a certificate is
// refused. Route URLs by DNS name are not measured (the names do not
// resolve here); by the source, a server then verifies by that name, and a
// route it dials by IP (one learned by gossip) is verified against the
// first DNS name of its configured routes (route.go saveRouteTLSName), so
// certificates must name more than their own server, or routes by IP must
// not happen.
func TestTLSRouteVerification(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	t.Parallel()
	for _, c := range []struct {
		name, cluster string
		mod           func(*leafSpec)
		verify        bool
		// fails: the text the routes fail with ("" = they form).
		fails string
	}{
		{"IP and DNS SANs", "vipdns", nil, true, ""},
		{"DNS SAN only", "vdns", func(l *leafSpec) { l.ips = nil }, true, "x509: cannot validate certificate for <addr> because it doesn't contain any IP SANs"},
		{"another IP SAN", "vip", func(l *leafSpec) { l.ips = []net.IP{net.ParseIP("127.0.0.1")} }, true, "x509: certificate is valid for <addr>, not <addr>"},
		{"server auth only", "veku", func(l *leafSpec) { l.usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth} }, true, "x509: certificate specifies an incompatible key usage"},
		{"verify false", "vnov", nil, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newTLSFixture(t, c.cluster, tlsFixtureOptions{servers: 2})
			for i := range f.servers {
				f.writeRouteCert(i, f.serverLeaf(f.ca, i, c.mod))
				f.writeRouteCA(i, f.ca)
				f.route[i] = f.routeBlock(i, c.verify)
			}
			for i, s := range f.servers {
				s.start(t, f.runOf(i, f.route[i], nil))
			}
			// verificationFindings: whether the routes formed, the handshake
			// errors both servers logged, /varz cluster.tls_verify, and a
			// route connection without a client certificate.
			var found struct {
				formed       stage
				errors       []string
				varzVerify   bool
				withoutACert routeProbe
			}
			acked := 0
			if c.fails == "" {
				found.formed = observeStage(f.servers, false, &acked, 60*time.Second)
			} else {
				waitForLog(t, f.servers, []int64{0, 0}, routeHandshakeError, 60*time.Second)
				time.Sleep(2 * time.Second) // a few more attempts, both ways
				found.errors = waitForLog(t, f.servers, []int64{0, 0}, routeHandshakeError, time.Second)
				found.formed = observeStage(f.servers, false, &acked, 0)
			}
			v, _ := readTLSVarz(f.servers[0])
			found.varzVerify = v.Cluster.TLSVerify
			found.withoutACert = probeRoute(f.servers[0].local, tlsPool(f.ca), nil)
			t.Logf("routes %s %s", found.formed, found.formed.detail)
			t.Logf("handshake errors %q", found.errors)
			t.Logf("/varz cluster.tls_verify=%t; a route connection without a client certificate: first line %q, error %q",
				found.varzVerify, found.withoutACert.info, found.withoutACert.err)

			if c.fails == "" {
				if !found.formed.ok() {
					t.Errorf("the routes do not form: %s (%s)", found.formed, found.formed.detail)
				}
			} else {
				if found.formed.routes {
					t.Errorf("the routes formed; want them to fail with %q", c.fails)
				}
				if !containsText(found.errors, c.fails) {
					t.Errorf("handshake errors %q, want %q among them", found.errors, c.fails)
				}
			}
			if !found.varzVerify || found.withoutACert.info == "INFO" {
				t.Errorf("verify %t: /varz cluster.tls_verify %t, a connection without a client certificate got %q; want verified all the same",
					c.verify, found.varzVerify, found.withoutACert.info)
			}
		})
	}
	t.Run("DNS route URLs", func(t *testing.T) {
		t.Skip("route URLs by DNS name need names that resolve to each server; none do here")
	})
}

// ---- case: a new route CA, one server at a time ----

// TestTLSRouteNewCAOneServerAtATime: what rolling a new route CA one server
// at a time does, the controller's old behaviour when its generated
// <name>-routes-ca went missing (a new CA, reloaded server by server). Three
// servers with JetStream route on CA A; server 2 is given a certificate of
// CA B and trusts only B, as a naive roll would.
//
// Measured: the reload is accepted and keeps server 2's established routes
// (reload never re-checks a route that is up), so the cluster looks
// settled; the breakage shows at the next route that connects. Server 2
// restarted on the new material (the way a restart-based roll goes) routes
// to neither 0 nor 1: both sides log "TLS route handshake error" (2 cannot
// verify their A certificates, they cannot verify its B certificate), so
// the cluster is split 0-1 | 2 while the others still run A. This is why a
// missing generated CA under running servers holds with RouteCAMissing
// (pkg/controller/gather_tls.go) instead of a new CA, and restart-all (all
// servers on B together) is the way out; the three-phase rotation
// (TestTLSRouteRotation: bundle, new certificates, drop the old CA) is the
// way that keeps every route.
func TestTLSRouteNewCAOneServerAtATime(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	t.Parallel()
	f := newTLSFixture(t, "newca", tlsFixtureOptions{servers: 3, jetStream: true, systemUser: true})
	f.setUpRouteTLS()
	for i := range f.servers {
		f.route[i] = f.routeBlock(i, true)
	}
	f.startAll()
	acked := createStream(t, f.servers[0])
	before := settledRouteConnections(f.servers, 30*time.Second)

	newCA := newTLSCA(t, "newca-ca-2")
	f.writeRouteCert(2, f.serverLeaf(newCA, 2, nil))
	f.writeRouteCA(2, newCA)
	reload := f.reloadSys(2, f.route[2], nil)
	afterReload := routeConnections(f.servers)
	kept := slices.Equal(afterReload, before)
	reloadStage := observeStage(f.servers, true, &acked, 20*time.Second)

	from := logSizes(f.servers)
	f.restart(2)
	handshake := waitForLog(t, f.servers, from, routeHandshakeError, 30*time.Second)
	time.Sleep(3 * time.Second) // a few more attempts, on both sides
	logged := errorsSince(t, f.servers, from)
	routed := routedPairs(f.servers)

	t.Logf("server 2 reloaded onto CA B (certificate and trust): %s; established routes kept %t; then %s %s", reload, kept, reloadStage, reloadStage.detail)
	t.Logf("server 2 restarted on CA B: routed pairs %v; handshake errors %q", routed, handshake)
	for i, e := range logged {
		t.Logf("  server %d logged %q", i, e)
	}

	if !reload.accepted || !kept {
		t.Errorf("the reload onto another CA: %s, routes kept %t; want accepted and kept (the breakage hidden)", reload, kept)
	}
	if !slices.Equal(routed, []string{"0-1"}) {
		t.Errorf("server 2 restarted on another CA: routed %v, want only 0-1 (split from both)", routed)
	}
	if !containsText(logged[2], routeHandshakeError) || (!containsText(logged[0], routeHandshakeError) && !containsText(logged[1], routeHandshakeError)) {
		t.Errorf("want route handshake errors on server 2 and on its peers; logged %q", logged)
	}
}
