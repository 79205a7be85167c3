package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/nats-operator/nats-operator/internal/pki"
)

// startMonitoringServer starts one standalone JetStream server whose
// monitoring port serves HTTPS with cert (a certificate for the client
// Service's name, as spec.monitoring.tls renders it) or, with cert nil,
// plain HTTP. It returns the server's address.
func startMonitoringServer(t *testing.T, name string, cert *pki.Pair) ServerAddr {
	t.Helper()
	dir := t.TempDir()
	port := freePort(t)
	conf := map[string]any{
		"server_name":     name,
		"listen":          fmt.Sprintf("%s:%d", testHost, freePort(t)),
		"server_metadata": map[string]string{MetadataConfigRevision: testRevision},
		"jetstream":       map[string]string{"store_dir": filepath.Join(dir, "js")},
	}
	monitor := fmt.Sprintf("%s:%d", testHost, port)
	if cert != nil {
		certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		if err := os.WriteFile(certFile, cert.Cert, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, cert.Key, 0o600); err != nil {
			t.Fatal(err)
		}
		conf["tls"] = map[string]any{"cert_file": certFile, "key_file": keyFile, "timeout": 2}
		conf["https"] = monitor
	} else {
		conf["http"] = monitor
	}
	b, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoSigs, opts.NoLog = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatalf("%s not ready", name)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return ServerAddr{Name: name, Host: testHost, MonitorPort: port, MonitorHTTPS: cert != nil}
}

// The monitoring port over HTTPS (spec.monitoring.tls) is read with the
// certificate verified against the cluster's CA for the client Service's
// name, whatever address is dialled; another CA or another name leaves the
// server silent, as does asking it over plain HTTP; and one Observer asks
// each server with its own scheme, as while a change of the setting rolls.
func TestObserveMonitoringOverHTTPS(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("demo client CA", now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("another CA", now)
	if err != nil {
		t.Fatal(err)
	}
	const serverName = "demo.ns.svc"
	cert, err := pki.Issue(ca, serverName, []string{serverName, serverName + ".cluster.local"}, now)
	if err != nil {
		t.Fatal(err)
	}
	https := startMonitoringServer(t, "demo-0", &cert)
	plain := startMonitoringServer(t, "demo-1", nil)

	o := New(Options{})
	defer o.Close()
	ctx := context.Background()
	target := func(caPEM []byte, name string, addrs ...ServerAddr) Target {
		return Target{Cluster: "ns/demo", Servers: addrs, TLSRootCAs: caPEM, TLSServerName: name}
	}
	check := func(what string, tg Target, server string, answered bool, errPart string) {
		t.Helper()
		snap := o.Observe(ctx, tg)
		s, ok := snap.Server(server)
		if !ok {
			t.Fatalf("%s: no server %s in the snapshot", what, server)
		}
		if s.Answered != answered || !strings.Contains(s.Err, errPart) {
			t.Errorf("%s: %s answered %t (want %t), err %q (want it to contain %q)", what, server, s.Answered, answered, s.Err, errPart)
		} else {
			t.Logf("%s: %s answered %t, err %q", what, server, s.Answered, s.Err)
		}
	}

	check("the cluster's CA", target(ca.Cert, serverName, https), "demo-0", true, "")
	// The same Observer and cluster: the connection verified with the
	// right CA is not reused for another.
	check("another CA", target(other.Cert, serverName, https), "demo-0", false, "certificate signed by unknown authority")
	check("another name", target(ca.Cert, "other.ns.svc", https), "demo-0", false, "certificate is valid for demo.ns.svc")
	check("no CA: the system's roots", target(nil, serverName, https), "demo-0", false, "certificate signed by unknown authority")
	asHTTP := https
	asHTTP.MonitorHTTPS = false
	check("plain HTTP to the HTTPS port", target(ca.Cert, serverName, asHTTP), "demo-0", false, "serves HTTPS only")
	asHTTPS := plain
	asHTTPS.MonitorHTTPS = true
	check("HTTPS to a plain HTTP port", target(ca.Cert, serverName, asHTTPS), "demo-1", false, "HTTP response to HTTPS client")

	mixed := target(ca.Cert, serverName, https, plain)
	check("mixed, the HTTPS server", mixed, "demo-0", true, "")
	check("mixed, the HTTP server", mixed, "demo-1", true, "")

	if snap := o.Observe(ctx, target([]byte("not PEM"), serverName, https)); snap.Verdict.Reason != "ObservationFailed" || !strings.Contains(snap.Verdict.Message, "no PEM certificate") {
		t.Errorf("a CA that is not PEM: verdict %+v", snap.Verdict)
	}
}
