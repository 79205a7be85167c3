package controller

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// operatorSeed is the seed of an operator nkey: a seed, but not a user's.
const operatorSeed = "SOAJJFLAXNIHVO2N2JKSDSQFOTF4XAVLU4WZHDS5376IFYGN7SEW6FRHOY"

// fixtureSystemUserSecret is a system user Secret holding the rendertest
// fixture password and its (cost 4) hash and nkey seed, changed by edit.
func fixtureSystemUserSecret(edit func(data map[string][]byte)) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: systemUserSecretName("demo"), ResourceVersion: "1"},
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			systemUserKeyUser:         []byte(render.SystemUserName),
			systemUserKeyPassword:     []byte(rt.SystemUserPassword),
			systemUserKeyPasswordHash: []byte(rt.SystemUserPasswordHash),
			systemUserKeyNKeySeed:     []byte(rt.SystemUserSeed),
		},
	}
	if edit != nil {
		edit(s.Data)
	}
	return s
}

func TestSystemUserSecret(t *testing.T) {
	nc := rt.NewCluster("ns", "demo")

	t.Run("a generated Secret round-trips", func(t *testing.T) {
		s, err := newSystemUserSecret(nc)
		if err != nil {
			t.Fatal(err)
		}
		wantMeta := metav1.ObjectMeta{
			Name:            "demo-system-user",
			Namespace:       "ns",
			Labels:          render.ClusterLabels("demo"),
			OwnerReferences: []metav1.OwnerReference{render.OwnerReference(nc)},
		}
		if diff := cmp.Diff(wantMeta, s.ObjectMeta); diff != "" {
			t.Errorf("metadata (-want +got):\n%s", diff)
		}
		if s.Type != corev1.SecretTypeOpaque {
			t.Errorf("type %q, want %q", s.Type, corev1.SecretTypeOpaque)
		}
		password := string(s.Data[systemUserKeyPassword])
		if raw, err := base64.RawURLEncoding.DecodeString(password); err != nil || len(raw) != systemUserPasswordBytes {
			t.Errorf("the password is not %d bytes in base64 RawURL encoding (%d bytes decoded, %v)", systemUserPasswordBytes, len(raw), err)
		}
		user, gotPassword, ru, err := systemUserFromSecret(s)
		if err != nil {
			t.Fatalf("reading the generated Secret: %v", err)
		}
		pub, err := render.SystemUserNKeyOf(s.Data[systemUserKeyNKeySeed])
		if err != nil {
			t.Fatalf("the generated Secret's nkey seed: %v", err)
		}
		want := &render.SystemUser{Name: render.SystemUserName, PasswordHash: string(s.Data[systemUserKeyPasswordHash]), NKey: pub}
		if user != render.SystemUserName || gotPassword != password {
			t.Errorf("user %q and a password of %d characters; want %q and the Secret's", user, len(gotPassword), render.SystemUserName)
		}
		if diff := cmp.Diff(want, ru); diff != "" {
			t.Errorf("system user (-want +got):\n%s", diff)
		}
		// The hash is one render accepts.
		if _, err := render.Render(render.Input{Cluster: nc, SystemUser: ru}); err != nil {
			t.Errorf("rendering with the generated system user: %v", err)
		}
	})

	t.Run("two generated Secrets have different passwords", func(t *testing.T) {
		a, err := newSystemUserSecret(nc)
		if err != nil {
			t.Fatal(err)
		}
		b, err := newSystemUserSecret(nc)
		if err != nil {
			t.Fatal(err)
		}
		if string(a.Data[systemUserKeyPassword]) == string(b.Data[systemUserKeyPassword]) {
			t.Error("two generated Secrets hold the same password")
		}
		if string(a.Data[systemUserKeyPasswordHash]) == string(b.Data[systemUserKeyPasswordHash]) {
			t.Error("two generated Secrets hold the same hash")
		}
		if string(a.Data[systemUserKeyNKeySeed]) == string(b.Data[systemUserKeyNKeySeed]) {
			t.Error("two generated Secrets hold the same nkey seed")
		}
	})

	t.Run("a Secret of an earlier release reads as the password user, and its upgrade as the nkey user", func(t *testing.T) {
		old := fixtureSystemUserSecret(func(d map[string][]byte) { delete(d, systemUserKeyNKeySeed) })
		old.ResourceVersion = "7"
		_, _, ru, err := systemUserFromSecret(old)
		if err != nil || ru.NKey != "" {
			t.Fatalf("the earlier release's Secret reads as %+v (%v), want the password user", ru, err)
		}
		var c systemUserCache
		up, err := c.upgradedFor(old)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := c.upgradedFor(old)
		if string(up.Data[systemUserKeyNKeySeed]) != string(again.Data[systemUserKeyNKeySeed]) {
			t.Error("two syncs of the same Secret version were offered different seeds")
		}
		if up.ResourceVersion != "7" || string(up.Data[systemUserKeyPassword]) != rt.SystemUserPassword {
			t.Errorf("the upgrade changed more than the seed: resourceVersion %q", up.ResourceVersion)
		}
		u := freshSystemUser(up)
		if u.render.NKey == "" || len(u.seed) == 0 || u.render.PasswordHash != rt.SystemUserPasswordHash {
			t.Errorf("the upgraded Secret's user is %+v, want the nkey user with the same password hash", u.render)
		}
		if _, err := render.Render(render.Input{Cluster: nc, SystemUser: u.render}); err != nil {
			t.Errorf("rendering the upgraded user: %v", err)
		}
	})
}

func TestSystemUserFromSecretRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(data map[string][]byte)
		// key is the key the error must name.
		key string
	}{
		{
			name: "a Secret without the user is refused",
			edit: func(d map[string][]byte) { delete(d, systemUserKeyUser) },
			key:  systemUserKeyUser,
		},
		{
			name: "a Secret without the password is refused",
			edit: func(d map[string][]byte) { delete(d, systemUserKeyPassword) },
			key:  systemUserKeyPassword,
		},
		{
			name: "a Secret without the hash is refused",
			edit: func(d map[string][]byte) { delete(d, systemUserKeyPasswordHash) },
			key:  systemUserKeyPasswordHash,
		},
		{
			name: "a Secret with an empty password is refused",
			edit: func(d map[string][]byte) { d[systemUserKeyPassword] = nil },
			key:  systemUserKeyPassword,
		},
		{
			name: "a Secret whose hash is of another password is refused",
			edit: func(d map[string][]byte) { d[systemUserKeyPasswordHash] = []byte(rt.RotatedSystemUserHash) },
			key:  systemUserKeyPasswordHash,
		},
		{
			name: "a Secret whose password was edited by hand is refused",
			edit: func(d map[string][]byte) { d[systemUserKeyPassword] = []byte(rt.RotatedSystemUserPassword) },
			key:  systemUserKeyPasswordHash,
		},
		{
			name: "a Secret whose nkey seed does not decode is refused",
			edit: func(d map[string][]byte) { d[systemUserKeyNKeySeed] = []byte("SUnot-a-seed") },
			key:  systemUserKeyNKeySeed,
		},
		{
			name: "a Secret whose nkey seed is not of a user is refused",
			edit: func(d map[string][]byte) { d[systemUserKeyNKeySeed] = []byte(operatorSeed) },
			key:  systemUserKeyNKeySeed,
		},
		{
			name: "a Secret whose hash is not a bcrypt hash is refused",
			edit: func(d map[string][]byte) {
				d[systemUserKeyPasswordHash] = []byte("#not-a-hash-" + rt.SystemUserPassword)
			},
			key: systemUserKeyPasswordHash,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fixtureSystemUserSecret(tc.edit)
			user, password, ru, err := systemUserFromSecret(s)
			if err == nil {
				t.Fatalf("read user %q, system user %+v; want an error", user, ru)
			}
			if user != "" || password != "" || ru != nil {
				t.Errorf("an error came with values: user %q, a password of %d characters, %+v", user, len(password), ru)
			}
			msg := err.Error()
			t.Logf("error: %s", msg)
			if !strings.Contains(msg, `"`+tc.key+`"`) || !strings.Contains(msg, "ns/demo-system-user") {
				t.Errorf("error %q does not name the key %q and the Secret", msg, tc.key)
			}
			for _, v := range s.Data {
				if len(v) > 0 && string(v) != render.SystemUserName && strings.Contains(msg, string(v)) {
					t.Errorf("error %q holds secret material", msg)
				}
			}
			for _, secret := range []string{rt.SystemUserPassword, rt.RotatedSystemUserPassword, rt.SystemUserPasswordHash, rt.RotatedSystemUserHash, rt.SystemUserSeed, operatorSeed} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q holds secret material", msg)
				}
			}
		})
	}
}

func TestSystemUserCache(t *testing.T) {
	// newCache returns a cache counting its checks.
	newCache := func() (*systemUserCache, *int) {
		n := 0
		return &systemUserCache{parse: func(s *corev1.Secret) (string, string, *render.SystemUser, error) {
			n++
			return systemUserFromSecret(s)
		}}, &n
	}
	for _, tc := range []struct {
		name string
		// versions are the resourceVersions of the Secret read in turn.
		versions   []string
		wantChecks int
	}{
		{name: "one version is checked once", versions: []string{"1", "1", "1"}, wantChecks: 1},
		{name: "every new version is checked again", versions: []string{"1", "2", "2", "3"}, wantChecks: 3},
		{name: "a Secret without a resourceVersion is checked every time", versions: []string{"", ""}, wantChecks: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, checks := newCache()
			for _, rv := range tc.versions {
				s := fixtureSystemUserSecret(nil)
				s.ResourceVersion = rv
				user, password, ru, err := c.get(s)
				if err != nil || user != render.SystemUserName || password != rt.SystemUserPassword || ru == nil || ru.PasswordHash != rt.SystemUserPasswordHash {
					t.Fatalf("get at resourceVersion %q = %q, (password ok: %v), %+v, %v", rv, user, password == rt.SystemUserPassword, ru, err)
				}
			}
			if *checks != tc.wantChecks {
				t.Errorf("checked %d times, want %d", *checks, tc.wantChecks)
			}
		})
	}

	t.Run("a refused version stays refused until the Secret changes", func(t *testing.T) {
		c, checks := newCache()
		bad := fixtureSystemUserSecret(func(d map[string][]byte) { delete(d, systemUserKeyPassword) })
		for range 2 {
			if _, _, _, err := c.get(bad); err == nil {
				t.Fatal("a Secret without a password was read")
			}
		}
		good := fixtureSystemUserSecret(nil)
		good.ResourceVersion = "2"
		if _, _, _, err := c.get(good); err != nil {
			t.Fatalf("the corrected Secret: %v", err)
		}
		if *checks != 2 {
			t.Errorf("checked %d times, want 2", *checks)
		}
	})

	t.Run("a forgotten Secret is checked again", func(t *testing.T) {
		c, checks := newCache()
		s := fixtureSystemUserSecret(nil)
		c.get(s)
		c.forget(s.Namespace, s.Name)
		c.get(s)
		if *checks != 2 {
			t.Errorf("checked %d times, want 2", *checks)
		}
	})

	t.Run("changing what get returned does not change the cache", func(t *testing.T) {
		c, _ := newCache()
		s := fixtureSystemUserSecret(nil)
		_, _, ru, _ := c.get(s)
		ru.PasswordHash = "changed"
		if _, _, again, _ := c.get(s); again.PasswordHash != rt.SystemUserPasswordHash {
			t.Errorf("the cached hash became %q", again.PasswordHash)
		}
	})
}

// A cluster without a system user Secret is offered the same fresh user on
// every sync (one bcrypt for it, not one a sync) until its Secret exists,
// a cluster of the same name but another uid gets another, and a cluster
// gone leaves nothing behind.
func TestFreshSystemUserIsMadeOncePerCluster(t *testing.T) {
	mints := 0
	c := &systemUserCache{mint: func(nc *clusterv1beta1.NatsCluster) (*corev1.Secret, error) {
		mints++
		return newSystemUserSecret(nc)
	}}
	nc := rt.NewCluster("ns", "demo")
	first, err := c.freshFor(nc)
	if err != nil {
		t.Fatal(err)
	}
	first.Data[systemUserKeyPassword] = []byte("changed by the caller")
	again, _ := c.freshFor(nc)
	if mints != 1 || string(again.Data[systemUserKeyPassword]) == "changed by the caller" {
		t.Fatalf("second sync: %d mints, password kept from the caller's change: %v; want 1 mint and the cache unchanged", mints, string(again.Data[systemUserKeyPassword]) == "changed by the caller")
	}
	if u := freshSystemUser(again); u.render.PasswordHash == "" || u.password == "" {
		t.Fatalf("fresh user %+v has no password or hash", u)
	}

	recreated := nc.DeepCopy()
	recreated.UID = "another-uid"
	other, _ := c.freshFor(recreated)
	if mints != 2 || string(other.Data[systemUserKeyPassword]) == string(again.Data[systemUserKeyPassword]) {
		t.Errorf("a cluster recreated with another uid: %d mints, same password: %v; want a new user", mints, string(other.Data[systemUserKeyPassword]) == string(again.Data[systemUserKeyPassword]))
	}

	c.forgetFresh(recreated.Namespace, recreated.Name) // its Secret now exists
	c.freshFor(recreated)
	if mints != 3 {
		t.Errorf("after the Secret existed: %d mints; want a new user (3)", mints)
	}

	s := fixtureSystemUserSecret(nil)
	c.get(s)
	c.forgetCluster("ns", "demo")
	c.mu.Lock()
	left := len(c.fresh) + len(c.entries)
	c.mu.Unlock()
	if left != 0 {
		t.Errorf("a cluster gone left %d entries (fresh %v, secrets %d)", left, c.fresh, len(c.entries))
	}
}
