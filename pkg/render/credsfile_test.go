package render_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// A creds file is a user JWT that decodes and verifies, and that user's
// seed: what nsc and jwt.FormatUserConfig write passes; a password, a JWT
// alone, an account's JWT and seed, another user's seed, a JWT whose
// signature does not verify are refused, the error quoting none of it.
func TestCheckCredsFileTakesOnlyACredsFile(t *testing.T) {
	app := rt.NewTrust(t, rt.WithAccounts("app")).Accounts[0]
	creds := app.UserCreds(t, "leaf")
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		t.Fatal(err)
	}
	other, err := jwt.ParseDecoratedNKey(app.UserCreds(t, "other"))
	if err != nil {
		t.Fatal(err)
	}
	otherSeed, _ := other.Seed()
	decorated := func(token, seed string) []byte {
		return fmt.Appendf(nil, "-----BEGIN NATS USER JWT-----\n%s\n------END NATS USER JWT------\n\n-----BEGIN USER NKEY SEED-----\n%s\n------END USER NKEY SEED------\n", token, seed)
	}
	kp, err := jwt.ParseDecoratedNKey(creds)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	// The same claims signed by a key that is not their issuer.
	forger, _ := nkeys.CreateAccount()
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := uc.Encode(forger)
	if err != nil {
		t.Fatal(err)
	}
	forged = forged[:strings.LastIndex(forged, ".")] + token[strings.LastIndex(token, "."):]

	if err := render.CheckCredsFile(creds); err != nil {
		t.Fatalf("a creds file: %v", err)
	}
	for _, tc := range []struct {
		name, secret, want string
		creds              []byte
	}{
		{"a password", "hunter2", "holds no user JWT", []byte("hunter2")},
		{"a JWT alone", token, "holds no user nkey seed", decorated(token, "")[:strings.Index(string(decorated(token, "")), "\n\n")+1]},
		{"an account's JWT and seed", string(app.Seed), "is not a user JWT", decorated(app.JWT, string(app.Seed))},
		{"another user's seed", string(otherSeed), "is not the key of the user its JWT is for", decorated(token, string(otherSeed))},
		{"a signature that does not verify", string(seed), "holds no user JWT that decodes and whose signature verifies", decorated(forged, string(seed))},
	} {
		err := render.CheckCredsFile(tc.creds)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), tc.secret) {
			t.Errorf("%s: the error quotes the file: %v", tc.name, err)
		}
	}
}
