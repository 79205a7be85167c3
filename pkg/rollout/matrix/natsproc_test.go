package matrix

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// The harness of the route-compatibility matrix: real nats-server processes
// (built from the Go module proxy by hack/testbin.sh, so two versions can run
// side by side), each with its own store directory that outlives restarts,
// running configs rendered by pkg/render and localized for loopback by
// rendertest.LocalizeConfig.

// natsBinary returns the path of nats-server of a version, built (once, then
// cached outside the repo) by hack/testbin.sh.
func natsBinary(t *testing.T, version string) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "hack", "testbin.sh"), "nats", version).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("hack/testbin.sh nats %s: %v\n%s", version, err, ee.Stderr)
		}
		t.Fatalf("hack/testbin.sh nats %s: %v", version, err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "nats-server")
}

// serverRun is what one server process runs: a rendered config localized
// for this machine, and what the harness needs to know of it.
type serverRun struct {
	// Name is the config's server_name (render.Server.Name).
	Name string
	// Binary is the nats-server of the spec's version.
	Binary string
	// Config is the localized nats.conf.
	Config []byte
	// JetStream says whether the config enables JetStream.
	JetStream bool
	// Creds is the user creds file a client connects with; "" without auth
	// (clients then land in the global account).
	Creds string
	// SystemPassword is the password of the controller's system user when
	// the config has it (without auth); "" otherwise.
	SystemPassword string
	// SystemSeed is the nkey seed of the controller's system user when the
	// config has it as an nkey user; "" otherwise (then SystemPassword).
	SystemSeed string
	// ClientCA is the PEM CA of the servers' client certificate when the
	// config has client TLS; nil otherwise.
	ClientCA []byte
	// MonitorTLS says whether the monitoring port serves HTTPS (with the
	// client certificate, verified against ClientCA).
	MonitorTLS bool
	// Files are written (path: content) just before the server starts:
	// its TLS material, which the two sides of a case may differ in.
	Files map[string][]byte
}

// HasSystemUser reports whether the config has the controller's system user.
func (r serverRun) HasSystemUser() bool { return r.SystemPassword != "" || r.SystemSeed != "" }

// systemAuth authenticates as the controller's system user of this config:
// its nkey when it has one, else its password.
func (r serverRun) systemAuth() nats.Option {
	if r.SystemSeed != "" {
		kp, err := nkeys.FromSeed([]byte(r.SystemSeed))
		if err != nil {
			panic(err)
		}
		pub, _ := kp.PublicKey()
		return nats.Nkey(pub, kp.Sign)
	}
	return nats.UserInfo(render.SystemUserName, r.SystemPassword)
}

// clientOptions connect a client to a server running this config.
func (r serverRun) clientOptions() []nats.Option {
	opts := []nats.Option{nats.Timeout(2 * time.Second), nats.NoReconnect(), nats.IgnoreDiscoveredServers()}
	if r.Creds != "" {
		opts = append(opts, nats.UserCredentials(r.Creds))
	}
	return append(opts, r.tlsOptions()...)
}

// tlsOptions verify a server with client TLS under the matrix's CA; none
// without client TLS.
func (r serverRun) tlsOptions() []nats.Option {
	if r.ClientCA == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.ClientCA)
	// The matrix's certificates name the loopback addresses (IP SANs),
	// which nats.go verifies against the address it dials.
	return []nats.Option{nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})}
}

// natsServer is one server process at a fixed place on this machine (its
// loopback ports and the directory standing in for its volumes), whatever
// config it runs.
type natsServer struct {
	local   rendertest.Local
	cmd     *exec.Cmd
	done    chan struct{}
	running serverRun
}

// start runs the server on a config; its store stays under s.local.Dir.
func (s *natsServer) start(t *testing.T, r serverRun) {
	t.Helper()
	conf := filepath.Join(s.local.Dir, "nats.conf")
	if err := os.WriteFile(conf, r.Config, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, b := range r.Files {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logPath := filepath.Join(s.local.Dir, "server.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(r.Binary, "--config", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd, s.running, s.done = cmd, r, make(chan struct{})
	done := s.done
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := s.get("/varz"); err == nil {
			return
		}
		select {
		case <-done:
			log, _ := os.ReadFile(logPath)
			t.Fatalf("%s exited at start:\n%s", r.Name, log)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not answer on its monitoring port", r.Name)
}

// stop shuts the server down (SIGTERM: at once, no lame duck).
func (s *natsServer) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

func (s *natsServer) get(path string) ([]byte, error) {
	client, base := httpClient, s.local.MonitorURL()
	if s.running.MonitorTLS {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.running.ClientCA)
		client = &http.Client{Timeout: httpClient.Timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		base = "https://" + strings.TrimPrefix(base, "http://")
	}
	resp, err := client.Get(base + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", path, resp.Status)
	}
	return []byte(b.String()), nil
}

func (s *natsServer) url() string { return s.local.ClientURL() }

// name is the server_name of the config the server runs.
func (s *natsServer) name() string { return s.running.Name }

// routedTo is the set of servers this one has a route to.
func (s *natsServer) routedTo() map[string]bool {
	out := map[string]bool{}
	b, err := s.get("/routez")
	if err != nil {
		return out
	}
	var rz struct {
		Routes []struct {
			RemoteName string `json:"remote_name"`
		} `json:"routes"`
	}
	if json.Unmarshal(b, &rz) == nil {
		for _, r := range rz.Routes {
			out[r.RemoteName] = true
		}
	}
	return out
}

type metaView struct {
	Leader   string `json:"leader"`
	Size     int    `json:"cluster_size"`
	Replicas []struct {
		Name    string `json:"name"`
		Current bool   `json:"current"`
		Offline bool   `json:"offline"`
	} `json:"replicas"`
}

func (s *natsServer) meta() (metaView, bool) {
	b, err := s.get("/jsz")
	if err != nil {
		return metaView{}, false
	}
	var jz struct {
		Meta *metaView `json:"meta_cluster"`
	}
	if json.Unmarshal(b, &jz) != nil || jz.Meta == nil {
		return metaView{}, false
	}
	return *jz.Meta, true
}
