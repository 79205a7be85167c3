package observe

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/nats-operator/nats-operator/internal/natsapi"
)

// Subjects of the system account and the JetStream API used here (see
// server/events.go and server/jetstream_api.go of nats-server).
const (
	subjectPing      = "$SYS.REQ.SERVER.PING." // + kind: STATSZ, IDZ, VARZ, JSZ, ...
	subjectServerIDZ = "$SYS.REQ.SERVER.%s.IDZ"
)

// Fan-out request kinds (the last token of $SYS.REQ.SERVER.PING.<kind>).
const (
	PingStatsz  = "STATSZ"
	PingIDZ     = "IDZ"
	PingVarz    = "VARZ"
	PingJsz     = "JSZ"
	PingHealthz = "HEALTHZ"
)

// ErrNoSystemCredentials is returned by System when the Target has neither
// SystemCredentials nor SystemUser and SystemPassword.
var ErrNoSystemCredentials = errors.New("no system credentials")

// ErrServerNotFound is returned when no server of the given name answered.
var ErrServerNotFound = errors.New("server not found")

// SystemClient is a connection to a cluster's system account, for what only
// $SYS can answer: fan-out requests and server ids; pkg/act sends its
// actions (reload, evacuate, remove peer, step down) through Request. It
// connects to the pod addresses of the Target, never through
// cluster DNS, and ignores servers discovered from INFO. It is safe for concurrent use; the Observer owns it.
type SystemClient struct {
	nc      *nats.Conn
	key     [32]byte
	timeout time.Duration
}

// System returns the $SYS client of the target's cluster, connecting on
// first use and again when the credentials (creds file, or system user and
// password) or the addresses change or the connection was closed. The
// connection lives until Forget or Close.
//
// With a system user, the connection is checked to be in the system
// account before it is returned: a server whose config has no accounts
// block ignores a user and password and lets the client into the global
// account without a word. Every new connection is therefore asked a
// request only the system account can answer ($SYS.REQ.SERVER.<id>.IDZ);
// with no responders, System closes it and returns an error wrapping
// ErrNotSystemAccount ("connected to demo-0 but not into the system
// account: the server does not run the controller's system user yet").
func (o *Observer) System(ctx context.Context, t Target) (*SystemClient, error) {
	auth, err := systemAuth(t)
	if err != nil {
		return nil, err
	}
	c, err := o.conns(t.Cluster)
	if err != nil {
		return nil, err
	}
	var urls []string
	for _, a := range t.Servers {
		if a.Host != "" {
			urls = append(urls, a.clientURL())
		}
	}
	if len(urls) == 0 {
		return nil, errors.New("connecting to the system account: no server has an address")
	}
	key := connectionKey(t, urls)

	c.sysMu.Lock()
	defer c.sysMu.Unlock()
	if s := c.sys; s != nil {
		if s.key == key && !s.nc.IsClosed() {
			return s, nil
		}
		s.close()
		c.sys = nil
	}
	timeout := o.opts.RequestTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = max(time.Until(d), time.Millisecond)
	}
	secure, err := systemTLS(t)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(strings.Join(urls, ","),
		auth,
		secure,
		nats.Name(o.opts.Name),
		nats.Timeout(timeout),
		nats.IgnoreDiscoveredServers(),
		// Never reconnects: the addresses are pod IPs, which another pod
		// (of another cluster, another tenant) may hold once the pod is
		// gone. A lost connection is made again by the next System call,
		// to the addresses of the pods there are then.
		nats.NoReconnect(),
		nats.NoCallbacksAfterClientClose(),
	)
	if err != nil {
		return nil, fmt.Errorf("connecting to the system account of %s: %w", t.Cluster, err)
	}
	why := "the server does not run the controller's system user yet"
	if len(t.SystemCredentials) > 0 {
		why = "the credentials are not of a system account user"
	}
	if err := checkSystemAccount(ctx, nc, timeout, why); err != nil {
		nc.Close()
		return nil, fmt.Errorf("connecting to the system account of %s: %w", t.Cluster, err)
	}
	if !o.current(t.Cluster, c) {
		// Forgotten or closed while connecting.
		nc.Close()
		return nil, ErrClosed
	}
	c.sys = &SystemClient{nc: nc, key: key, timeout: o.opts.RequestTimeout}
	return c.sys, nil
}

// systemAuth is the nats.go option that authenticates as the target's
// system account user: the creds file when there is one, else the system
// user and password. Neither is ever put in an error.
func systemAuth(t Target) (nats.Option, error) {
	if len(t.SystemCredentials) == 0 && len(t.SystemNKeySeed) > 0 {
		kp, err := nkeys.FromSeed(t.SystemNKeySeed)
		if err != nil {
			return nil, errors.New("connecting to the system account: the system user's nkey seed does not decode")
		}
		pub, err := kp.PublicKey()
		if err != nil || !nkeys.IsValidPublicUserKey(pub) {
			return nil, errors.New("connecting to the system account: the system user's nkey seed is not a user seed")
		}
		return nats.Nkey(pub, kp.Sign), nil
	}
	if len(t.SystemCredentials) == 0 {
		switch {
		case t.SystemUser == "" && t.SystemPassword == "":
			return nil, ErrNoSystemCredentials
		case t.SystemUser == "":
			return nil, errors.New("connecting to the system account: a system password was given without a system user")
		case t.SystemPassword == "":
			return nil, fmt.Errorf("connecting to the system account: system user %q has no password", t.SystemUser)
		}
		return nats.UserInfo(t.SystemUser, t.SystemPassword), nil
	}
	userJWT, err := jwt.ParseDecoratedJWT(t.SystemCredentials)
	if err != nil {
		return nil, errors.New("connecting to the system account: the credentials hold no user JWT")
	}
	seed, err := jwt.ParseDecoratedUserNKey(t.SystemCredentials)
	if err != nil {
		return nil, errors.New("connecting to the system account: the credentials hold no user seed")
	}
	seedBytes, err := seed.Seed()
	if err != nil {
		return nil, errors.New("connecting to the system account: the credentials hold no user seed")
	}
	return nats.UserJWTAndSeed(userJWT, string(seedBytes)), nil
}

// systemTLS is the nats.go option for the target's TLS: none without
// TLSRootCAs.
func systemTLS(t Target) (nats.Option, error) {
	if len(t.TLSRootCAs) == 0 {
		return func(*nats.Options) error { return nil }, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(t.TLSRootCAs) {
		return nil, errors.New("connecting to the system account: the cluster's CA holds no PEM certificate")
	}
	c := &tls.Config{RootCAs: pool, ServerName: t.TLSServerName, MinVersion: tls.VersionTLS12}
	if len(t.TLSClientCert) > 0 {
		cert, err := tls.X509KeyPair(t.TLSClientCert, t.TLSClientKey)
		if err != nil {
			return nil, fmt.Errorf("connecting to the system account: the controller's client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return nats.Secure(c), nil
}

// connectionKey is a digest of what a $SYS connection was made with: the
// credentials (creds file, or user and password: a changed password makes
// a new connection), the addresses and the pods' UIDs. Every part is length-prefixed, so no
// two different inputs run together into the same bytes.
func connectionKey(t Target, urls []string) [32]byte {
	h := sha256.New()
	part := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	if len(t.SystemCredentials) > 0 {
		part([]byte("creds"))
		part(t.SystemCredentials)
	} else if len(t.SystemNKeySeed) > 0 {
		part([]byte("nkey"))
		part(t.SystemNKeySeed)
	} else {
		part([]byte("user"))
		part([]byte(t.SystemUser))
		part([]byte(t.SystemPassword))
	}
	for _, u := range urls {
		part([]byte(u))
	}
	for _, a := range t.Servers {
		part([]byte(a.PodUID))
	}
	part(t.TLSRootCAs)
	part([]byte(t.TLSServerName))
	part(t.TLSClientCert)
	part(t.TLSClientKey)
	var key [32]byte
	copy(key[:], h.Sum(nil))
	return key
}

// ErrNotSystemAccount is wrapped by the error of System when the
// connection was made but is not in the system account (see System).
var ErrNotSystemAccount = errors.New("not into the system account")

// checkSystemAccount asks the connected server for its id
// ($SYS.REQ.SERVER.<id>.IDZ), which only a client of the system account
// can: from any other account the request has no responders. why says what
// that means for these credentials.
func checkSystemAccount(ctx context.Context, nc *nats.Conn, timeout time.Duration, why string) error {
	id, name := nc.ConnectedServerId(), nc.ConnectedServerName()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, fmt.Sprintf(subjectServerIDZ, id), nil)
	if errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("connected to %s but %w: %s", name, ErrNotSystemAccount, why)
	}
	if err != nil {
		return fmt.Errorf("checking that the connection to %s is in the system account: %w", name, err)
	}
	r, err := decodeReply(m.Data)
	if err != nil {
		return fmt.Errorf("checking that the connection to %s is in the system account: %w", name, err)
	}
	if r.Server.ID != id {
		return fmt.Errorf("checking that the connection to %s is in the system account: answered by server id %q, not %q", name, r.Server.ID, id)
	}
	return nil
}

func (c *SystemClient) close() { c.nc.Close() }

// ServerInfo identifies the server that sent a reply.
type ServerInfo struct {
	Name     string            `json:"name"`
	Host     string            `json:"host"`
	ID       string            `json:"id"`
	Cluster  string            `json:"cluster,omitempty"`
	Version  string            `json:"ver,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// ConfigRevision is the server_metadata config revision in the reply.
func (s ServerInfo) ConfigRevision() string { return s.Metadata[MetadataConfigRevision] }

// Reply is one server's answer to a $SYS request.
type Reply struct {
	Server ServerInfo
	// Data is the reply's payload: "data" of a monitoring reply, "statsz"
	// of a STATSZ reply, the whole reply of IDZ.
	Data json.RawMessage
	// Error is the error the server answered with, if any.
	Error string
}

// FanOut is what a fan-out request collected.
type FanOut struct {
	// Replies, sorted by server name.
	Replies []Reply
	// Missing lists the asked-for servers that did not answer, sorted.
	Missing []string
}

// wireReply decodes any reply of the $SYS.REQ.SERVER.* family.
type wireReply struct {
	Server *ServerInfo       `json:"server"`
	Data   json.RawMessage   `json:"data"`
	Statsz json.RawMessage   `json:"statsz"`
	Error  *natsapi.APIError `json:"error"`
	// IDZ replies are a bare ServerID.
	Name string `json:"name"`
	Host string `json:"host"`
	ID   string `json:"id"`
}

// decodeReply decodes one $SYS reply.
func decodeReply(b []byte) (Reply, error) {
	var w wireReply
	if err := json.Unmarshal(b, &w); err != nil {
		return Reply{}, fmt.Errorf("decoding $SYS reply: %w", err)
	}
	r := Reply{Data: w.Data}
	switch {
	case w.Server != nil:
		r.Server = *w.Server
	default:
		r.Server = ServerInfo{Name: w.Name, Host: w.Host, ID: w.ID}
		r.Data = json.RawMessage(slices.Clone(b))
	}
	if len(w.Statsz) > 0 {
		r.Data = w.Statsz
	}
	if w.Error != nil {
		r.Error = w.Error.Error()
	}
	return r, nil
}

// Ping sends $SYS.REQ.SERVER.PING.<kind> to every server and collects the
// replies until every named server answered or the request timeout (or the
// context) ends. With names, only replies from servers whose name matches
// one exactly are kept (demo-1 is not demo-10), and the request asks the
// servers to filter by exact name too when there is one name; without
// names every reply is kept until the timeout (with gateways, servers of
// other clusters answer too).
func (c *SystemClient) Ping(ctx context.Context, kind string, names ...string) (*FanOut, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var body []byte
	if len(names) == 1 {
		body, _ = json.Marshal(map[string]any{"server_name": names[0], "exact_match": true})
	}
	if err := c.ready(ctx); err != nil {
		return nil, err
	}
	inbox := c.nc.NewRespInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := c.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("subscribing for %s replies: %w", kind, err)
	}
	defer sub.Unsubscribe()
	if err := c.nc.PublishRequest(subjectPing+kind, inbox, body); err != nil {
		return nil, fmt.Errorf("publishing %s%s: %w", subjectPing, kind, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	got := map[string]Reply{}
	var replies []Reply
collect:
	for {
		select {
		case <-ctx.Done():
			break collect
		case m := <-ch:
			r, err := decodeReply(m.Data)
			if err != nil {
				continue
			}
			if len(want) > 0 {
				if !want[r.Server.Name] {
					continue
				}
				if _, dup := got[r.Server.Name]; !dup {
					got[r.Server.Name] = r
				}
				if len(got) == len(want) {
					break collect
				}
				continue
			}
			replies = append(replies, r)
		}
	}
	out := &FanOut{}
	if len(want) > 0 {
		for _, r := range got {
			out.Replies = append(out.Replies, r)
		}
		for n := range want {
			if _, ok := got[n]; !ok {
				out.Missing = append(out.Missing, n)
			}
		}
		slices.Sort(out.Missing)
	} else {
		out.Replies = replies
	}
	slices.SortStableFunc(out.Replies, func(a, b Reply) int { return strings.Compare(a.Server.Name, b.Server.Name) })
	return out, nil
}

// Statsz asks the named servers (every server when none is named) for
// STATSZ; each reply's Server carries version and config revision.
func (c *SystemClient) Statsz(ctx context.Context, names ...string) (*FanOut, error) {
	return c.Ping(ctx, PingStatsz, names...)
}

// ServerID resolves a server's current id by its exact name. Ids change on
// every restart, so targeted requests resolve them right before use.
func (c *SystemClient) ServerID(ctx context.Context, name string) (string, error) {
	f, err := c.Ping(ctx, PingIDZ, name)
	if err != nil {
		return "", err
	}
	if len(f.Replies) == 0 || f.Replies[0].Server.ID == "" {
		return "", fmt.Errorf("resolving the id of server %s: %w", name, ErrServerNotFound)
	}
	return f.Replies[0].Server.ID, nil
}

// ready makes sure the connection works before a request goes out: a
// request published just after its server went away (a restart) is lost
// without an error, and the caller would wait the whole timeout for a reply
// that cannot come. A PING round trip shows the connection alive. A
// connection whose server went away is closed (it never reconnects, see
// System): ready then fails at once, and the next System call connects to
// the pods there are then.
func (c *SystemClient) ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	for {
		if c.nc.IsClosed() {
			return nats.ErrConnectionClosed
		}
		if c.nc.IsConnected() {
			fctx, fcancel := context.WithTimeout(ctx, c.timeout/4)
			err := c.nc.FlushWithContext(fctx)
			fcancel()
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the system account connection is not ready: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Request sends one request on the system account connection and returns
// the reply's payload (pkg/act sends its actions through it). It waits for
// the connection to be ready first, and the reply at most the request
// timeout.
func (c *SystemClient) Request(ctx context.Context, subject string, body []byte) ([]byte, error) {
	if err := c.ready(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	m, err := c.nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		return nil, err
	}
	return m.Data, nil
}
