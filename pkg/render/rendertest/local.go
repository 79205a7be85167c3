package rendertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/nats-operator/nats-operator/internal/testport"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// Local is where one rendered server runs on this machine: its loopback
// ports and the directory that stands in for its volumes.
type Local struct {
	Host        string
	ClientPort  int
	ClusterPort int
	MonitorPort int
	// GatewayPort is where the server listens for gateway connections
	// when its config has a gateway block.
	GatewayPort int
	// LeafPort is where the server listens for leaf connections when its
	// config has leafnodes.listen.
	LeafPort int
	// WebSocketPort and MQTTPort are where the server listens for
	// WebSocket and MQTT clients when its config has those blocks.
	WebSocketPort int
	MQTTPort      int
	// Dir holds data/ (for /data) and run/ (for /var/run/nats).
	Dir string
}

// ClientURL is nats://host:clientPort.
func (l Local) ClientURL() string { return fmt.Sprintf("nats://%s:%d", l.Host, l.ClientPort) }

// MonitorURL is http://host:monitorPort.
func (l Local) MonitorURL() string { return fmt.Sprintf("http://%s:%d", l.Host, l.MonitorPort) }

// LocalizeConfig rewrites a rendered nats.conf to run on this machine: the
// listen addresses become self's loopback ports, each route's pod host name
// (a key of routes, e.g. "demo-1-0.demo-headless.ns.svc") becomes that
// server's loopback cluster port, and /data, /var/run/nats and the TLS
// files under /etc/nats-config move under self.Dir (data, run, config; the
// caller writes the TLS files there). Everything else is kept as rendered.
func LocalizeConfig(cfg []byte, self Local, routes map[string]Local) ([]byte, error) {
	return LocalizeSuperclusterConfig(cfg, self, routes, nil)
}

// LocalizeSuperclusterConfig is LocalizeConfig for a server of a
// supercluster: the gateway block listens on self's gateway port (and
// advertises it when the rendered block advertises an address), and each
// gateway URL's host (a key of gateways: a headless Service,
// "west-headless.ns.svc", or a pod host) becomes the gateway ports of
// those servers, one URL each, as the Service's DNS name would resolve to
// every one of them.
func LocalizeSuperclusterConfig(cfg []byte, self Local, routes map[string]Local, gateways map[string][]Local) ([]byte, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(cfg))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decoding rendered config: %w", err)
	}
	hostPort := func(p int) string { return net.JoinHostPort(self.Host, strconv.Itoa(p)) }
	m["listen"] = hostPort(self.ClientPort)
	if _, ok := m["https"]; ok {
		m["https"] = hostPort(self.MonitorPort)
	} else {
		m["http"] = hostPort(self.MonitorPort)
	}
	path := func(p string) string {
		switch {
		case strings.HasPrefix(p, render.DataDir):
			return filepath.Join(self.Dir, "data", strings.TrimPrefix(p, render.DataDir))
		case strings.HasPrefix(p, render.PidDir):
			return filepath.Join(self.Dir, "run", strings.TrimPrefix(p, render.PidDir))
		case strings.HasPrefix(p, render.ConfigDir):
			return filepath.Join(self.Dir, "config", strings.TrimPrefix(p, render.ConfigDir))
		}
		return p
	}
	tlsPaths := func(block any) {
		b, ok := block.(map[string]any)
		if !ok {
			return
		}
		for _, k := range []string{"cert_file", "key_file", "ca_file"} {
			if p, ok := b[k].(string); ok {
				b[k] = path(p)
			}
		}
	}
	tlsPaths(m["tls"])
	if p, ok := m["pid_file"].(string); ok {
		m["pid_file"] = path(p)
	}
	if cl, ok := m["cluster"].(map[string]any); ok {
		cl["listen"] = hostPort(self.ClusterPort)
		tlsPaths(cl["tls"])
		if rs, ok := cl["routes"].([]any); ok {
			for i, r := range rs {
				u, err := url.Parse(r.(string))
				if err != nil {
					return nil, fmt.Errorf("route %q: %w", r, err)
				}
				peer, ok := routes[u.Hostname()]
				if !ok {
					return nil, fmt.Errorf("route %q: no local address for host %s", r, u.Hostname())
				}
				u.Host = net.JoinHostPort(peer.Host, strconv.Itoa(peer.ClusterPort))
				rs[i] = u.String()
			}
		}
	}
	if gw, ok := m["gateway"].(map[string]any); ok {
		if self.GatewayPort == 0 {
			return nil, fmt.Errorf("the config has a gateway block and %s no gateway port", self.Dir)
		}
		gw["listen"] = hostPort(self.GatewayPort)
		tlsPaths(gw["tls"])
		if _, ok := gw["advertise"]; ok {
			gw["advertise"] = hostPort(self.GatewayPort)
		}
		remotes, _ := gw["gateways"].([]any)
		for _, r := range remotes {
			remote := r.(map[string]any)
			var urls []any
			for _, raw := range remote["urls"].([]any) {
				u, err := url.Parse(raw.(string))
				if err != nil {
					return nil, fmt.Errorf("gateway URL %q: %w", raw, err)
				}
				peers, ok := gateways[u.Hostname()]
				if !ok {
					return nil, fmt.Errorf("gateway URL %q: no local address for host %s", raw, u.Hostname())
				}
				for _, p := range peers {
					lu := *u
					lu.Host = net.JoinHostPort(p.Host, strconv.Itoa(p.GatewayPort))
					urls = append(urls, lu.String())
				}
			}
			remote["urls"] = urls
		}
	}
	if ln, ok := m["leafnodes"].(map[string]any); ok {
		tlsPaths(ln["tls"])
		remotes, _ := ln["remotes"].([]any)
		for _, r := range remotes {
			if remote, ok := r.(map[string]any); ok {
				tlsPaths(remote["tls"])
				if p, ok := remote["credentials"].(string); ok {
					remote["credentials"] = path(p)
				}
			}
		}
		if _, ok := ln["listen"]; ok {
			if self.LeafPort == 0 {
				return nil, fmt.Errorf("the config has leafnodes.listen and %s no leaf port", self.Dir)
			}
			ln["listen"] = hostPort(self.LeafPort)
		}
	}
	for block, port := range map[string]int{"websocket": self.WebSocketPort, "mqtt": self.MQTTPort} {
		if b, ok := m[block].(map[string]any); ok {
			if port == 0 {
				return nil, fmt.Errorf("the config has a %s block and %s no %s port", block, self.Dir, block)
			}
			b["port"] = port
			b["host"] = self.Host
			tlsPaths(b["tls"])
		}
	}
	if js, ok := m["jetstream"].(map[string]any); ok {
		if p, ok := js["store_dir"].(string); ok {
			js["store_dir"] = path(p)
		}
	}
	if res, ok := m["resolver"].(map[string]any); ok {
		if p, ok := res["dir"].(string); ok {
			res["dir"] = path(p)
		}
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

// LocalCluster is a rendered cluster running as in-process nats-servers.
type LocalCluster struct {
	Servers []*server.Server
	Locals  []Local
	// ConfigFiles are the localized configs the servers loaded.
	ConfigFiles []string
}

// ClientURLs is every server's client URL, comma separated.
func (c *LocalCluster) ClientURLs() string {
	urls := make([]string, len(c.Locals))
	for i, l := range c.Locals {
		urls[i] = l.ClientURL()
	}
	return strings.Join(urls, ",")
}

// LocalAddresses picks a free loopback port triple and a directory under
// t.TempDir() for every server of out (rendered for namespace/cluster), by
// ordinal, and the route host map LocalizeConfig wants.
func LocalAddresses(t testing.TB, out *render.Output, namespace, cluster string) ([]Local, map[string]Local) {
	t.Helper()
	base := t.TempDir()
	locals := make([]Local, len(out.Servers))
	routes := make(map[string]Local, len(out.Servers))
	for i, s := range out.Servers {
		l := Local{
			Host:          localHost,
			ClientPort:    freePort(t),
			ClusterPort:   freePort(t),
			MonitorPort:   freePort(t),
			GatewayPort:   freePort(t),
			LeafPort:      freePort(t),
			WebSocketPort: freePort(t),
			MQTTPort:      freePort(t),
			Dir:           filepath.Join(base, s.Name),
		}
		for _, d := range []string{"data", "run"} {
			if err := os.MkdirAll(filepath.Join(l.Dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		locals[i] = l
		routes[render.PodHost(cluster, namespace, s.Ordinal)] = l
	}
	return locals, routes
}

// StartLocalCluster runs every server of out (rendered for the NatsCluster
// namespace/cluster) as an in-process nats-server on loopback and stops them
// at the end of the test.
func StartLocalCluster(t testing.TB, out *render.Output, namespace, cluster string) *LocalCluster {
	t.Helper()
	locals, routes := LocalAddresses(t, out, namespace, cluster)
	lc := &LocalCluster{Locals: locals}
	for i, s := range out.Servers {
		cfg, err := LocalizeConfig(s.Config, locals[i], routes)
		if err != nil {
			t.Fatalf("localizing %s: %v", s.Name, err)
		}
		file := filepath.Join(locals[i].Dir, "nats.conf")
		if err := os.WriteFile(file, cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		opts, err := server.ProcessConfigFile(file)
		if err != nil {
			t.Fatalf("loading config of %s: %v", s.Name, err)
		}
		opts.NoSigs = true
		opts.NoLog = true
		srv, err := server.NewServer(opts)
		if err != nil {
			t.Fatalf("creating server %s: %v", s.Name, err)
		}
		t.Cleanup(func() {
			srv.Shutdown()
			srv.WaitForShutdown()
		})
		go srv.Start()
		lc.Servers = append(lc.Servers, srv)
		lc.ConfigFiles = append(lc.ConfigFiles, file)
	}
	for i, srv := range lc.Servers {
		if !srv.ReadyForConnections(20 * time.Second) {
			t.Fatalf("server %s not ready for connections", out.Servers[i].Name)
		}
	}
	return lc
}

// localHost is the loopback address this test binary's servers listen on:
// one of 127.192.0.0/10 chosen at random, so servers of test packages running
// in parallel (most listen on 127.0.0.1, where clients also take their
// source ports) do not take each other's ports between freePort and the
// listen.
var localHost = fmt.Sprintf("127.%d.%d.%d", 192+rand.IntN(62), rand.IntN(256), 1+rand.IntN(254))

func freePort(t testing.TB) int { return testport.Free(t, localHost) }
