package rollout

import (
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

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/nats-operator/nats-operator/internal/testport"
)

// The harness of the route-compatibility matrix: real nats-server processes
// (built from the Go module proxy by hack/testbin.sh, so two versions can run
// side by side), each with its own store directory that outlives restarts,
// configured as JSON the way pkg/render renders nats.conf.

// natsBinary returns the path of nats-server of a version, built (once, then
// cached outside the repo) by hack/testbin.sh.
func natsBinary(t *testing.T, version string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
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

// identity is an nkey with its public key.
type identity struct {
	kp  nkeys.KeyPair
	pub string
}

func newIdentity(t *testing.T, create func() (nkeys.KeyPair, error)) identity {
	t.Helper()
	kp, err := create()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return identity{kp, pub}
}

// trustWorld is the trust material of every variant: NATS operators A and B;
// system accounts sysA and sysA2 (issued by A) and sysB (issued by B); the
// application accounts app (issued by A and, re-signed, by B) and app2
// (issued by A); and a user of app.
type trustWorld struct {
	opA, opB          identity
	sysA, sysA2, sysB identity
	app, app2         identity
	appCredsPath      string
	accountJWT        map[string]map[string]string // operator pub -> account pub -> JWT
	operatorJWTNaming map[string]string            // system account pub -> operator JWT naming it
	operatorOfSystem  map[string]identity
}

func newTrustWorld(t *testing.T, dir string) *trustWorld {
	t.Helper()
	w := &trustWorld{
		opA: newIdentity(t, nkeys.CreateOperator), opB: newIdentity(t, nkeys.CreateOperator),
		sysA: newIdentity(t, nkeys.CreateAccount), sysA2: newIdentity(t, nkeys.CreateAccount), sysB: newIdentity(t, nkeys.CreateAccount),
		app: newIdentity(t, nkeys.CreateAccount), app2: newIdentity(t, nkeys.CreateAccount),
		accountJWT: map[string]map[string]string{}, operatorJWTNaming: map[string]string{}, operatorOfSystem: map[string]identity{},
	}
	sign := func(op identity, acct identity, js bool) {
		ac := jwt.NewAccountClaims(acct.pub)
		ac.Name = acct.pub[:8]
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		tok, err := ac.Encode(op.kp)
		if err != nil {
			t.Fatal(err)
		}
		if w.accountJWT[op.pub] == nil {
			w.accountJWT[op.pub] = map[string]string{}
		}
		w.accountJWT[op.pub][acct.pub] = tok
	}
	for _, pair := range []struct{ op, sys identity }{{w.opA, w.sysA}, {w.opA, w.sysA2}, {w.opB, w.sysB}} {
		sign(pair.op, pair.sys, false)
		oc := jwt.NewOperatorClaims(pair.op.pub)
		oc.Name = "op"
		oc.SystemAccount = pair.sys.pub
		tok, err := oc.Encode(pair.op.kp)
		if err != nil {
			t.Fatal(err)
		}
		w.operatorJWTNaming[pair.sys.pub] = tok
		w.operatorOfSystem[pair.sys.pub] = pair.op
	}
	sign(w.opA, w.app, true)
	sign(w.opB, w.app, true)
	sign(w.opA, w.app2, true)

	user := newIdentity(t, nkeys.CreateUser)
	uc := jwt.NewUserClaims(user.pub)
	uc.IssuerAccount = "" // issued by the account's identity key
	tok, err := uc.Encode(w.app.kp)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := user.kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(tok, seed)
	if err != nil {
		t.Fatal(err)
	}
	w.appCredsPath = filepath.Join(dir, "app.creds")
	if err := os.WriteFile(w.appCredsPath, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// variant is one server config of the matrix.
type variant struct {
	version     string
	clusterName string
	// system account public key; empty = no auth. The NATS operator is the
	// one that issued it.
	system     string
	accounts   []string // preloaded application accounts
	jetStream  bool
	domain     string
	maxMemory  int64
	maxFile    int64
	serverTags []string
}

// facts are the planner's view of a variant.
func (v variant) facts(w *trustWorld) ConfigFacts {
	f := ConfigFacts{Version: v.version, ClusterName: v.clusterName, JetStream: v.jetStream, JetStreamDomain: v.domain,
		MaxMemoryStore: v.maxMemory, MaxFileStore: v.maxFile, ServerTags: v.serverTags}
	if v.system != "" {
		f.Operator, f.SystemAccount, f.Accounts = w.operatorOfSystem[v.system].pub, v.system, v.accounts
	}
	return f
}

// clientOptions connect a client to a server running this variant: without
// auth into the global account, with auth as the app user.
func (v variant) clientOptions(w *trustWorld) []nats.Option {
	opts := []nats.Option{nats.Timeout(2 * time.Second), nats.NoReconnect(), nats.IgnoreDiscoveredServers()}
	if v.system != "" {
		opts = append(opts, nats.UserCredentials(w.appCredsPath))
	}
	return opts
}

// natsServer is one server process and its ports and store.
type natsServer struct {
	name                            string
	dir                             string
	clientPort, httpPort, routePort int
	cmd                             *exec.Cmd
	done                            chan struct{}
	running                         variant
}

type serverConfigJSON struct {
	ServerName      string            `json:"server_name"`
	Listen          string            `json:"listen"`
	HTTP            string            `json:"http"`
	Cluster         map[string]any    `json:"cluster"`
	JetStream       map[string]any    `json:"jetstream,omitempty"`
	ServerTags      []string          `json:"server_tags,omitempty"`
	Operator        string            `json:"operator,omitempty"`
	SystemAccount   string            `json:"system_account,omitempty"`
	Resolver        map[string]any    `json:"resolver,omitempty"`
	ResolverPreload map[string]string `json:"resolver_preload,omitempty"`
}

func (s *natsServer) config(v variant, routes []string, w *trustWorld) []byte {
	c := serverConfigJSON{
		ServerName: s.name,
		Listen:     fmt.Sprintf("127.0.0.1:%d", s.clientPort),
		HTTP:       fmt.Sprintf("127.0.0.1:%d", s.httpPort),
		Cluster:    map[string]any{"name": v.clusterName, "listen": fmt.Sprintf("127.0.0.1:%d", s.routePort), "routes": routes},
		ServerTags: v.serverTags,
	}
	if v.jetStream {
		js := map[string]any{"store_dir": filepath.Join(s.dir, "jetstream"), "max_memory_store": v.maxMemory, "max_file_store": v.maxFile}
		if v.domain != "" {
			js["domain"] = v.domain
		}
		c.JetStream = js
	}
	if v.system != "" {
		op := w.operatorOfSystem[v.system]
		c.Operator = w.operatorJWTNaming[v.system]
		c.SystemAccount = v.system
		c.Resolver = map[string]any{"type": "full", "dir": filepath.Join(s.dir, "resolver"), "allow_delete": false, "interval": "2m"}
		c.ResolverPreload = map[string]string{v.system: w.accountJWT[op.pub][v.system]}
		for _, a := range v.accounts {
			c.ResolverPreload[a] = w.accountJWT[op.pub][a]
		}
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

// freePort picks a free port below the kernel's ephemeral range, so that no
// outgoing connection takes it while its server restarts.
func freePort(t *testing.T) int { return testport.Free(t, "127.0.0.1") }

// start runs the server on a variant; its store stays in s.dir.
func (s *natsServer) start(t *testing.T, bin string, v variant, routes []string, w *trustWorld) {
	t.Helper()
	conf := filepath.Join(s.dir, "nats.conf")
	if err := os.WriteFile(conf, s.config(v, routes, w), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd, s.running, s.done = cmd, v, make(chan struct{})
	done := s.done
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := s.get("/varz"); err == nil {
			return
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			t.Fatalf("%s exited at start:\n%s", s.name, log)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not answer on its monitoring port", s.name)
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
	resp, err := httpClient.Get(fmt.Sprintf("http://127.0.0.1:%d%s", s.httpPort, path))
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

func (s *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.clientPort) }

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
