package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

func TestTheSystemAccountIsSignedByTheOperatorsSigningKeyAndNamedByIt(t *testing.T) {
	c, err := NewChain("demo")
	if err != nil {
		t.Fatal(err)
	}
	checkChain(t, c)
}

// checkChain checks what the controller checks of trust objects: the NATS
// operator names the system account, both accounts are signed by one of its
// signing keys and are the keys they claim, and each user belongs to its
// account.
func checkChain(t *testing.T, c *Chain) {
	t.Helper()
	oc, err := jwt.DecodeOperatorClaims(c.OperatorJWT)
	if err != nil {
		t.Fatal(err)
	}
	if oc.SystemAccount != c.SystemAccountPublicKey {
		t.Errorf("operator system_account = %s, want %s", oc.SystemAccount, c.SystemAccountPublicKey)
	}
	for _, acct := range []struct {
		name, jwt, pub string
		creds          []byte
	}{
		{"system", c.SystemAccountJWT, c.SystemAccountPublicKey, c.SystemUserCreds},
		{"app", c.AppAccountJWT, c.AppAccountPublicKey, c.AppUserCreds},
	} {
		ac, err := jwt.DecodeAccountClaims(acct.jwt)
		if err != nil {
			t.Fatalf("%s account: %v", acct.name, err)
		}
		if ac.Subject != acct.pub {
			t.Errorf("%s account subject = %s, want %s", acct.name, ac.Subject, acct.pub)
		}
		if !oc.SigningKeys.Contains(ac.Issuer) {
			t.Errorf("%s account issuer %s is not a signing key of the NATS operator", acct.name, ac.Issuer)
		}
		userJWT, err := jwt.ParseDecoratedJWT(acct.creds)
		if err != nil {
			t.Fatalf("%s user creds: %v", acct.name, err)
		}
		uc, err := jwt.DecodeUserClaims(userJWT)
		if err != nil {
			t.Fatalf("%s user: %v", acct.name, err)
		}
		if uc.Issuer != acct.pub {
			t.Errorf("%s user issuer = %s, want its account %s", acct.name, uc.Issuer, acct.pub)
		}
		kp, err := jwt.ParseDecoratedNKey(acct.creds)
		if err != nil {
			t.Fatalf("%s user seed: %v", acct.name, err)
		}
		if pub, _ := kp.PublicKey(); pub != uc.Subject {
			t.Errorf("%s user seed is of %s, want %s", acct.name, pub, uc.Subject)
		}
	}
}

// TestAServerTrustingTheChainAdmitsBothUsers runs nats-server in operator
// mode, as a NatsCluster with auth renders it, and connects as each user.
func TestAServerTrustingTheChainAdmitsBothUsers(t *testing.T) {
	c, err := NewChain("demo")
	if err != nil {
		t.Fatal(err)
	}
	checkServerAdmitsBothUsers(t, c)
}

func checkServerAdmitsBothUsers(t *testing.T, c *Chain) {
	dir := t.TempDir()
	conf := fmt.Sprintf(`{
  "listen": "127.0.0.1:-1",
  "operator": %q,
  "system_account": %q,
  "resolver": "MEMORY",
  "resolver_preload": {%q: %q, %q: %q},
  "jetstream": {"store_dir": %q}
}`, c.OperatorJWT, c.SystemAccountPublicKey,
		c.SystemAccountPublicKey, c.SystemAccountJWT, c.AppAccountPublicKey, c.AppAccountJWT,
		filepath.Join(dir, "js"))
	confPath := filepath.Join(dir, "nats.conf")
	writeFile(t, confPath, []byte(conf))
	opts, err := server.ProcessConfigFile(confPath)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoSigs = true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("nats-server not ready")
	}

	connect := func(t *testing.T, creds []byte, file string) *nats.Conn {
		t.Helper()
		path := filepath.Join(dir, file)
		writeFile(t, path, creds)
		nc, err := nats.Connect(s.ClientURL(), nats.UserCredentials(path))
		if err != nil {
			t.Fatalf("connecting with %s: %v", file, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}

	t.Run("the system user can ping the servers over $SYS", func(t *testing.T) {
		nc := connect(t, c.SystemUserCreds, "system.creds")
		if _, err := nc.Request("$SYS.REQ.SERVER.PING", nil, 2*time.Second); err != nil {
			t.Fatalf("$SYS.REQ.SERVER.PING: %v", err)
		}
	})
	t.Run("the app user can use JetStream in its account", func(t *testing.T) {
		nc := connect(t, c.AppUserCreds, "app.creds")
		js, err := nc.JetStream()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.AddStream(&nats.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
			t.Fatalf("adding a stream: %v", err)
		}
		if _, err := js.Publish("orders.1", []byte("one")); err != nil {
			t.Fatalf("publishing: %v", err)
		}
	})
}

func TestTheManifestsCarryTheChainUnderTheNamesANatsClusterRefersTo(t *testing.T) {
	c, err := NewChain("demo")
	if err != nil {
		t.Fatal(err)
	}
	out, err := JoinYAML(Manifests(c, "demo", "ns"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		md := m["metadata"].(map[string]any)
		if md["namespace"] != "ns" {
			t.Errorf("%s %s: namespace %v, want ns", m["kind"], md["name"], md["namespace"])
		}
		if _, ok := md["creationTimestamp"]; ok {
			t.Errorf("%s %s has a creationTimestamp", m["kind"], md["name"])
		}
		got[fmt.Sprintf("%s/%s", m["kind"], md["name"])] = m
	}
	for _, want := range []struct {
		key  string
		path []string
		val  string
	}{
		{"NatsOperatorTrust/demo", []string{"spec", "operatorJWT"}, c.OperatorJWT},
		{"NatsOperatorTrust/demo", []string{"spec", "systemAccountJWT"}, c.SystemAccountJWT},
		{"NatsAccountTrust/demo-app", []string{"spec", "publicKey"}, c.AppAccountPublicKey},
		{"NatsAccountTrust/demo-app", []string{"spec", "jwt"}, c.AppAccountJWT},
		{"Secret/demo-system-creds", []string{"stringData", CredsKey}, string(c.SystemUserCreds)},
		{"Secret/demo-app-creds", []string{"stringData", CredsKey}, string(c.AppUserCreds)},
	} {
		obj, ok := got[want.key]
		if !ok {
			t.Errorf("no %s in the output", want.key)
			continue
		}
		v := any(obj)
		for _, p := range want.path {
			v, _ = v.(map[string]any)[p]
		}
		if v != want.val {
			t.Errorf("%s %s = %v, want %s", want.key, strings.Join(want.path, "."), v, want.val)
		}
	}
	if len(got) != 4 {
		t.Errorf("got %d objects, want 4: %v", len(got), got)
	}
}

// seedPattern matches an nkey seed of any kind.
var seedPattern = regexp.MustCompile(`S[OAUNCPX][A-Z2-7]{56}`)

func TestSeedsAppearOnlyInSecrets(t *testing.T) {
	c, err := NewChain("demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Manifests(c, "demo", "") {
		y, err := MarshalYAML(m.Object)
		if err != nil {
			t.Fatal(err)
		}
		seeds := seedPattern.FindAllString(string(y), -1)
		if _, isSecret := m.Object.(*corev1.Secret); isSecret {
			if len(seeds) != 1 || !strings.HasPrefix(seeds[0], "SU") {
				t.Errorf("%s: got seeds %d, want exactly one user seed", m.File, len(seeds))
			}
			continue
		}
		if len(seeds) != 0 {
			t.Errorf("%s is not a Secret but holds %d seeds", m.File, len(seeds))
		}
	}
}

func TestOutDirGetsOneFileForEachObject(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := run("demo", "", dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"natsoperatortrust.yaml", "natsaccounttrust-app.yaml", "secret-system-creds.yaml", "secret-app-creds.yaml"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v, want no access for group and others", f, fi.Mode().Perm())
		}
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func jwtSubject(token string) (string, error) {
	claims, err := jwt.Decode(token)
	if err != nil {
		return "", err
	}
	return claims.Claims().Subject, nil
}
