package sysuser

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

func TestNewSignerChecksTheKeyAgainstTheSystemAccount(t *testing.T) {
	f := rt.NewTrust(t)
	skPub, skSeed, withKey := f.SystemSigningKey(t)
	other, _ := nkeys.CreateAccount()
	otherSeed, _ := other.Seed()
	user, _ := nkeys.CreateUser()
	userSeed, _ := user.Seed()

	if s, err := NewSigner(f.System.Seed, f.System.JWT); err != nil || s.Key != s.Account {
		t.Errorf("the account's own key: %+v, %v", s, err)
	}
	if s, err := NewSigner(skSeed, withKey); err != nil || s.Key != skPub || s.Account != f.System.PublicKey {
		t.Errorf("a signing key of the account: %+v, %v", s, err)
	}
	for name, tc := range map[string]struct {
		seed []byte
		jwt  string
		want string
	}{
		"a signing key the JWT does not list": {skSeed, f.System.JWT, "neither the system account"},
		"another account's key":               {otherSeed, withKey, "neither the system account"},
		"a user seed":                         {userSeed, withKey, "not the seed of an account key"},
		"not a seed":                          {[]byte("SAnot-a-seed"), withKey, "not an nkey seed"},
	} {
		_, err := NewSigner(tc.seed, tc.jwt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), string(tc.seed)) {
			t.Errorf("%s: the error holds the seed", name)
		}
	}
}

func TestMintIssuesAShortLivedUserOfTheSystemAccount(t *testing.T) {
	f := rt.NewTrust(t)
	skPub, skSeed, withKey := f.SystemSigningKey(t)
	s, err := NewSigner(skSeed, withKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	u, err := s.Mint("nats-operator", now, 30*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.ParseDecoratedJWT(u.Creds)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	if uc.Issuer != skPub || uc.IssuerAccount != f.System.PublicKey || uc.Subject != u.PublicKey {
		t.Errorf("issuer %s (account %s) subject %s; want the signing key, the system account and the minted key", uc.Issuer, uc.IssuerAccount, uc.Subject)
	}
	if got := time.Unix(uc.Expires, 0); !got.Equal(now.Add(30*time.Minute)) || !u.Expires.Equal(got) {
		t.Errorf("expires %s (User says %s), want %s", got, u.Expires, now.Add(30*time.Minute))
	}
	if got, want := []string(uc.Pub.Allow), []string{
		"$SYS.REQ.SERVER.*.IDZ", "$SYS.REQ.SERVER.PING.IDZ", "$SYS.REQ.SERVER.PING.JSZ",
		"$SYS.REQ.SERVER.*.RELOAD", "$JS.API.SERVER.REMOVE", "$JS.API.SERVER.EVACUATE", "$JS.API.META.LEADER.STEPDOWN",
	}; !slices.Equal(got, want) {
		t.Errorf("may publish %q, want exactly the controller's requests %q", got, want)
	}
	if got := []string(uc.Sub.Allow); !slices.Equal(got, []string{"_INBOX.>"}) {
		t.Errorf("may subscribe to %q, want only the replies, _INBOX.>", got)
	}
	if len(uc.Pub.Deny) != 0 || len(uc.Sub.Deny) != 0 || uc.Resp != nil {
		t.Errorf("denies %q and %q, responses %+v; want none (the allow lists say it all)", uc.Pub.Deny, uc.Sub.Deny, uc.Resp)
	}
	if _, err := jwt.ParseDecoratedUserNKey(u.Creds); err != nil {
		t.Errorf("the creds hold no user seed: %v", err)
	}
	again, _ := s.Mint("nats-operator", now, 30*time.Minute)
	if again.PublicKey == u.PublicKey {
		t.Error("two mints made the same user key")
	}
	if Due(u.Expires, now.Add(19*time.Minute), 30*time.Minute) || !Due(u.Expires, now.Add(20*time.Minute), 30*time.Minute) {
		t.Error("a user is due for renewal from the last third of its lifetime on, not before")
	}
}
