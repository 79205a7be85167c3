package observe

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Default ports of a server, as pkg/render configures them.
const (
	DefaultMonitorPort = 8222
	DefaultClientPort  = 4222
)

// MetadataConfigRevision is the server_metadata key carrying the config
// revision.
const MetadataConfigRevision = "config_revision"

// Defaults of Options.
const (
	DefaultRequestTimeout = 2 * time.Second
	DefaultJszPageSize    = 64
	// maxResponseBytes bounds what one monitoring response may hold.
	maxResponseBytes = 256 << 20
)

// Target says which cluster to observe and where its servers are.
type Target struct {
	// Cluster identifies the cluster among those one Observer watches
	// (e.g. "namespace/name"); connections are kept per Cluster.
	Cluster string
	// Servers lists every expected server, in the order Snapshot.Servers
	// will list them. A server without a Host (no pod IP yet) is silent.
	Servers []ServerAddr
	// SystemCredentials is the content of a creds file of a system account
	// user (operator mode only). Observe does not need it; System does.
	SystemCredentials []byte
	// SystemUser and SystemPassword are the controller's system user for
	// clusters without spec.auth (render.SystemUser, whose password the
	// controller keeps in a Secret). System uses them when
	// SystemCredentials is empty; Observe does not need them.
	SystemUser, SystemPassword string
	// SystemNKeySeed, when set, is the seed of the controller's system user
	// as an nkey user (render.SystemUser.NKey): System then signs the
	// server's nonce with it and sends no password.
	SystemNKeySeed []byte
	// TLSRootCAs, when set, are the PEM CA certificates the servers' client
	// certificate chains to: System then connects over TLS, verifying the
	// certificate against them and against TLSServerName (the name of the
	// client Service, which the client certificate is for), whatever
	// address it dials. Observe verifies the monitoring port of a server
	// with MonitorHTTPS the same way (spec.monitoring.tls serves it with
	// the client certificate); without TLSRootCAs against the system's
	// roots. Verification is never skipped.
	TLSRootCAs    []byte
	TLSServerName string
	// TLSClientCert and TLSClientKey, when set, are the PEM client
	// certificate and key System presents (servers with
	// spec.tls.verifyClients refuse a client without one).
	TLSClientCert, TLSClientKey []byte
}

// ServerAddr is where one server is reached: its pod IP, never a DNS name
// (a split cluster must be seen as split, server by server).
type ServerAddr struct {
	// Name is the server name (server_name), e.g. "demo-0".
	Name string
	// Host is the pod IP (or any address reaching this one server).
	Host string
	// MonitorPort is the HTTP monitoring port; 0 means DefaultMonitorPort.
	MonitorPort int
	// MonitorHTTPS asks the monitoring port over HTTPS, verifying its
	// certificate against Target.TLSRootCAs for Target.TLSServerName
	// (spec.monitoring.tls). It is per server: while a change of
	// spec.monitoring.tls rolls, servers of both kinds run.
	MonitorHTTPS bool
	// ClientPort is the client port; 0 means DefaultClientPort.
	ClientPort int
	// PodUID is the UID of the pod at Host, when known: the system account
	// connection is tied to the pods it was made to (a new pod at any
	// address makes a new connection) and never redials an address.
	PodUID string
}

func (a ServerAddr) monitorURL() string {
	port := a.MonitorPort
	if port == 0 {
		port = DefaultMonitorPort
	}
	scheme := "http://"
	if a.MonitorHTTPS {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(a.Host, strconv.Itoa(port))
}

func (a ServerAddr) clientURL() string {
	port := a.ClientPort
	if port == 0 {
		port = DefaultClientPort
	}
	return "nats://" + net.JoinHostPort(a.Host, strconv.Itoa(port))
}

// Options tune an Observer. The zero value gives the defaults.
type Options struct {
	// RequestTimeout bounds each monitoring request and each $SYS request;
	// a silent server costs at most about this long. Default 2s.
	RequestTimeout time.Duration
	// JszPageSize is how many accounts one /jsz request asks for. Default 64.
	JszPageSize int
	// Name is the NATS client name of $SYS connections. Default
	// "nats-operator".
	Name string
}

// Observer observes NATS clusters. It is safe for concurrent use. It keeps,
// per cluster, an HTTP client (whose idle connections are reused between
// observations) and a $SYS connection once System has been called. Forget
// releases one cluster's, Close everything.
type Observer struct {
	opts Options

	mu       sync.Mutex
	closed   bool
	clusters map[string]*clusterConns
}

// clusterConns is what the Observer keeps for one cluster.
type clusterConns struct {
	// http is the monitoring client, replaced (under Observer.mu) when
	// the TLS it verifies with changes.
	http  *monitorClient
	sysMu sync.Mutex    // guards sys
	sys   *SystemClient // nil until System is called
}

// New returns an Observer.
func New(opts Options) *Observer {
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.JszPageSize <= 0 {
		opts.JszPageSize = DefaultJszPageSize
	}
	if opts.Name == "" {
		opts.Name = "nats-operator"
	}
	return &Observer{opts: opts, clusters: map[string]*clusterConns{}}
}

// ErrClosed is returned once the Observer is closed.
var ErrClosed = errors.New("observer closed")

// monitorClient is an HTTP client of one cluster's monitoring ports and
// the TLS it verifies HTTPS with (tlsKey).
type monitorClient struct {
	transport *http.Transport
	client    *http.Client
	tlsKey    [32]byte
}

// monitorTLSKey is a digest of what HTTPS is verified with.
func monitorTLSKey(t Target) [32]byte {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(t.TLSRootCAs)))
	h.Write(n[:])
	h.Write(t.TLSRootCAs)
	h.Write([]byte(t.TLSServerName))
	var key [32]byte
	copy(key[:], h.Sum(nil))
	return key
}

// monitorTLSConfig is the TLS of HTTPS monitoring requests: the server's
// certificate verified against the target's CAs (the system's roots
// without) for TLSServerName, whatever address is dialled. Monitoring
// never asks for a client certificate.
func monitorTLSConfig(t Target) (*tls.Config, error) {
	c := &tls.Config{ServerName: t.TLSServerName, MinVersion: tls.VersionTLS12}
	if len(t.TLSRootCAs) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(t.TLSRootCAs) {
			return nil, errors.New("monitoring over HTTPS: the cluster's CA holds no PEM certificate")
		}
		c.RootCAs = pool
	}
	return c, nil
}

// conns returns the cluster's connections, making them on first use.
func (o *Observer) conns(cluster string) (*clusterConns, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, ErrClosed
	}
	c := o.clusters[cluster]
	if c == nil {
		c = &clusterConns{}
		o.clusters[cluster] = c
	}
	return c, nil
}

// monitorClientFor returns the cluster's connections and its monitoring
// client for t's TLS: made on first use, and made again (the old one's
// idle connections closed) when the CA or server name changed.
func (o *Observer) monitorClientFor(t Target) (*clusterConns, *monitorClient, error) {
	tlsConfig, err := monitorTLSConfig(t)
	if err != nil {
		return nil, nil, err
	}
	key := monitorTLSKey(t)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, nil, ErrClosed
	}
	c := o.clusters[t.Cluster]
	if c == nil {
		c = &clusterConns{}
		o.clusters[t.Cluster] = c
	}
	if c.http == nil || c.http.tlsKey != key {
		if c.http != nil {
			c.http.transport.CloseIdleConnections()
		}
		tr := &http.Transport{
			// Never a proxy: the pod addresses are reached directly.
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: o.opts.RequestTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       tlsConfig,
			TLSHandshakeTimeout:   o.opts.RequestTimeout,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: o.opts.RequestTimeout,
			ForceAttemptHTTP2:     false,
		}
		c.http = &monitorClient{transport: tr, client: &http.Client{Transport: tr}, tlsKey: key}
	}
	return c, c.http, nil
}

// current reports whether c is still the cluster's kept connections.
func (o *Observer) current(cluster string, c *clusterConns) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.clusters[cluster] == c
}

// currentMonitor reports whether m is still the monitoring client of c,
// c still the cluster's kept connections.
func (o *Observer) currentMonitor(cluster string, c *clusterConns, m *monitorClient) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.clusters[cluster] == c && c.http == m
}

// Forget releases what the Observer keeps for one cluster (when the cluster
// is deleted, or its servers all changed).
func (o *Observer) Forget(cluster string) {
	o.mu.Lock()
	c := o.clusters[cluster]
	delete(o.clusters, cluster)
	o.mu.Unlock()
	c.release()
}

// Close releases every connection. Observe then reports ObservationFailed
// and System returns ErrClosed.
func (o *Observer) Close() {
	o.mu.Lock()
	o.closed = true
	clusters := o.clusters
	o.clusters = map[string]*clusterConns{}
	o.mu.Unlock()
	for _, c := range clusters {
		c.release()
	}
}

func (c *clusterConns) release() {
	if c == nil {
		return
	}
	c.sysMu.Lock()
	if c.sys != nil {
		c.sys.close()
		c.sys = nil
	}
	c.sysMu.Unlock()
	if m := c.http; m != nil {
		m.transport.CloseIdleConnections()
	}
}

// Observe asks every server of the target, in parallel, over its monitoring
// endpoint, and returns what they said with the Settled verdict. It never
// fails: what could not be asked is in the Snapshot (Server.Err, and the
// verdict). It returns once every request has finished; a silent server
// costs at most about Options.RequestTimeout, plus one timeout per further
// /jsz page of a server that answered the first and then went silent.
func (o *Observer) Observe(ctx context.Context, t Target) *Snapshot {
	start := time.Now()
	snap := &Snapshot{Cluster: t.Cluster, Started: start}
	for _, a := range t.Servers {
		snap.Expected = append(snap.Expected, a.Name)
	}
	failed := func(msg string) *Snapshot {
		snap.Verdict = Verdict{Status: metav1.ConditionUnknown, Reason: clusterv1beta1.ReasonObservationFailed, Message: msg}
		snap.Took = time.Since(start)
		return snap
	}
	if len(t.Servers) == 0 {
		return failed("no servers to observe")
	}
	if err := ctx.Err(); err != nil {
		return failed("observation not started: " + err.Error())
	}
	c, m, err := o.monitorClientFor(t)
	if err != nil {
		return failed(err.Error())
	}

	reports := make([]*report, len(t.Servers))
	var wg sync.WaitGroup
	for i, a := range t.Servers {
		wg.Go(func() { reports[i] = o.ask(ctx, m.client, a) })
	}
	wg.Wait()
	if !o.currentMonitor(t.Cluster, c, m) {
		// Forgotten, closed or replaced while asking: drop the connections
		// just used.
		m.transport.CloseIdleConnections()
	}

	for _, r := range reports {
		snap.Servers = append(snap.Servers, buildServer(r, snap.Expected))
	}
	snap.MetaLeader = agreedMetaLeader(snap.Servers)
	snap.reports = reports
	if lead := o.remoteMetaLeader(ctx, t, reports, snap.MetaLeader); lead != nil {
		// The leader's view of the meta group, for the groups alone.
		snap.reports = append(snap.reports, lead)
	}
	snap.Groups, snap.Streams = buildGroups(snap.reports)
	snap.Verdict = Judge(snap.Expected, snap.Servers, snap.Groups)
	snap.Took = time.Since(start)
	return snap
}

// agreedMetaLeader is the meta leader every answering JetStream server names.
func agreedMetaLeader(servers []Server) string {
	leader := ""
	for _, s := range servers {
		if !s.Answered || !s.JetStream || !s.Clustered {
			continue
		}
		if s.MetaLeader == "" || (leader != "" && s.MetaLeader != leader) {
			return ""
		}
		leader = s.MetaLeader
	}
	return leader
}

// ask queries one server: /varz, /jsz (paged), /routez and /healthz at
// once, then, once /varz says the server has them, /gatewayz and /leafz.
// Asked one after the other, /varz and the rest were two round trips to a
// busy server on the path of every step's gate (issue 37); at once they
// are one, for the same requests at rest. A server that does not answer
// /varz, or answers as another server, is silent: what else it answered
// is dropped (those requests are the cost of asking at once: up to three
// more to a server that is down, each refused or timed out together).
func (o *Observer) ask(ctx context.Context, client *http.Client, a ServerAddr) *report {
	r := &report{addr: a}
	if a.Host == "" {
		r.fatal = "no address"
		return r
	}
	base := a.monitorURL()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		varzErr error
		jszErr  error
		softErr = func(endpoint string, err error) {
			mu.Lock()
			defer mu.Unlock()
			r.soft = append(r.soft, fmt.Sprintf("%s: %v", endpoint, err))
		}
	)
	// soft reads one endpoint that is not essential: fetch (o.get, or
	// o.getAny for one whose error status has a body), decode, and keep
	// it under mu, or note the failure.
	soft := func(endpoint string, fetch func(context.Context, *http.Client, string) ([]byte, error), keep func([]byte) error) {
		wg.Go(func() {
			b, err := fetch(ctx, client, base+endpoint)
			if err == nil {
				mu.Lock()
				err = keep(b)
				mu.Unlock()
			}
			if err != nil {
				softErr(endpoint, err)
			}
		})
	}
	wg.Go(func() {
		body, err := o.get(ctx, client, base+"/varz")
		var v *wireVarz
		if err == nil {
			v, err = decodeVarz(body)
		}
		r.varz, varzErr = v, err // read only after wg.Wait, as r.jsz
		if err != nil || v.Name != a.Name {
			return
		}
		// The endpoints /varz says the server has (wg counts this
		// goroutine, so adding to it here is before its Wait returns).
		if v.Gateway.Name != "" {
			soft("/gatewayz", o.get, func(b []byte) (err error) { r.gatewayz, err = decodeGatewayz(b); return err })
		}
		if v.Leaf.Port != 0 || len(v.Leaf.Remotes) > 0 {
			soft("/leafz", o.get, func(b []byte) (err error) { r.leafz, err = decodeLeafz(b); return err })
		}
	})
	wg.Go(func() { r.jsz, jszErr = o.jsz(ctx, client, base) })
	soft("/routez", o.get, func(b []byte) (err error) { r.routez, err = decodeRoutez(b); return err })
	// /healthz answers 503 with a JSON body when unhealthy: keep it.
	soft("/healthz", o.getAny, func(b []byte) (err error) { r.healthz, err = decodeHealthz(b); return err })
	wg.Wait()

	switch {
	case varzErr != nil:
		r.fatal = varzErr.Error()
	case r.varz.Name != a.Name:
		// The address reached another server (a pod IP reused, a stale
		// address): the expected server did not answer.
		r.fatal = fmt.Sprintf("%s answered as server %q", a.Host, r.varz.Name)
	default:
		if jszErr != nil {
			r.fatal = jszErr.Error()
		}
		return r
	}
	// Silent: only what /varz said is kept, as when nothing else was asked.
	r.jsz, r.routez, r.healthz, r.soft = nil, nil, nil, nil
	return r
}

// jsz reads every page of /jsz with account, stream, consumer and Raft
// detail. nats-server pages /jsz by account (offset, limit; "total" is the
// number of JetStream accounts), so a page holds all streams of its
// accounts.
func (o *Observer) jsz(ctx context.Context, client *http.Client, base string) ([]*wireJsz, error) {
	var pages []*wireJsz
	seen := 0
	for {
		url := base + "/jsz?accounts=true&streams=true&consumers=true&raft=true&offset=" +
			strconv.Itoa(seen) + "&limit=" + strconv.Itoa(o.opts.JszPageSize)
		b, err := o.get(ctx, client, url)
		if err != nil {
			return pages, err
		}
		page, err := decodeJsz(b)
		if err != nil {
			return pages, err
		}
		pages = append(pages, page)
		seen += len(page.Accounts)
		if page.Disabled || len(page.Accounts) == 0 || seen >= page.Total || len(pages) > 100000 {
			return pages, nil
		}
	}
}

// get fetches one monitoring URL, failing on a status other than 200.
func (o *Observer) get(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	return o.fetch(ctx, client, url, false)
}

// getAny fetches one monitoring URL and returns its body whatever the status.
func (o *Observer) getAny(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	return o.fetch(ctx, client, url, true)
}

func (o *Observer) fetch(ctx context.Context, client *http.Client, url string, anyStatus bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, o.opts.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if len(body) > maxResponseBytes {
		return nil, fmt.Errorf("reading %s: response larger than %d bytes", url, maxResponseBytes)
	}
	if resp.StatusCode == http.StatusBadRequest && bytes.Contains(body, []byte("HTTP request to an HTTPS server")) {
		return nil, fmt.Errorf("GET %s: the monitoring port serves HTTPS only (spec.monitoring.tls)", url)
	}
	if resp.StatusCode != http.StatusOK && !anyStatus {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// ViewRemoteMetaLeader completes a snapshot whose servers all name a meta
// leader in another cluster of the supercluster that Observe could not ask
// (its Target had no $SYS access): it asks the leader through t's $SYS
// and, when it answers, rebuilds the snapshot's groups and Verdict with
// its view. It says whether it did.
func (o *Observer) ViewRemoteMetaLeader(ctx context.Context, t Target, snap *Snapshot) bool {
	if snap == nil {
		return false
	}
	lead := o.remoteMetaLeader(ctx, t, snap.reports, snap.MetaLeader)
	if lead == nil {
		return false
	}
	snap.reports = append(snap.reports, lead)
	snap.Groups, snap.Streams = buildGroups(snap.reports)
	snap.Verdict = Judge(snap.Expected, snap.Servers, snap.Groups)
	return true
}

// remoteMetaLeader asks, over $SYS, the meta leader every server names
// when it is a server of another cluster of the supercluster (the servers
// have a gateway, and none of them is the leader): only the leader's /jsz
// lists the meta group's members and whether each is current, and its
// monitoring port is another cluster's. Its answer is a report holding
// that /jsz alone; nil when the leader is one of the cluster's servers, no
// leader is agreed, or the leader cannot be asked (no $SYS access, no
// answer): the Verdict then says the meta group has no leader the cluster
// can see.
func (o *Observer) remoteMetaLeader(ctx context.Context, t Target, reports []*report, leader string) *report {
	if leader == "" {
		return nil
	}
	gateway := false
	for _, r := range reports {
		if r.reporter() == leader {
			return nil
		}
		gateway = gateway || (r.varz != nil && r.varz.Gateway.Name != "")
	}
	if !gateway {
		return nil
	}
	sys, err := o.System(ctx, t)
	if err != nil {
		return nil
	}
	out, err := sys.Ping(ctx, PingJsz, leader)
	if err != nil || len(out.Replies) != 1 || out.Replies[0].Error != "" {
		return nil
	}
	jsz, err := decodeJsz(out.Replies[0].Data)
	if err != nil || jsz.Meta == nil || jsz.Meta.Leader != leader {
		return nil
	}
	jsz.Accounts = nil
	return &report{addr: ServerAddr{Name: leader}, varz: &wireVarz{Name: leader}, jsz: []*wireJsz{jsz}}
}
