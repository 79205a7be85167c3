package render_test

import (
	"testing"

	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// A creds file names the account of its user; what is no creds file is an
// error.
func TestCredsAccountIsTheAccountOfTheUser(t *testing.T) {
	f := rt.NewTrust(t, rt.WithAccounts("app"))
	app := f.NewAccount(t, "orders")
	got, err := render.CredsAccount(app.UserCreds(t, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	if got != app.PublicKey {
		t.Errorf("CredsAccount = %s, want the account %s", got, app.PublicKey)
	}
	if _, err := render.CredsAccount([]byte("not a creds file")); err == nil {
		t.Error("a text that is no creds file named an account")
	}
}
