package render_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

func TestTheSystemUserIsAUserOfTheSystemAccountInEveryServersConfig(t *testing.T) {
	out, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo", rt.JetStream()), SystemUser: rt.SystemUser()})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Servers {
		opts := loadRendered(t, s.Config)
		var users []string
		for _, u := range opts.Users {
			acc := ""
			if u.Account != nil {
				acc = u.Account.Name
			}
			users = append(users, u.Username+"@"+acc+":"+u.Password)
		}
		if diff := cmp.Diff([]string{render.SystemUserName + "@$SYS:" + rt.SystemUserPasswordHash}, users); diff != "" {
			t.Errorf("%s: nats-server reads the users (-want +got):\n%s", s.Name, diff)
		}
		if opts.SystemAccount != "" || opts.NoAuthUser != "" {
			t.Errorf("%s: system_account %q, no_auth_user %q rendered; want neither (nats-server adds its own no-auth user of $G)", s.Name, opts.SystemAccount, opts.NoAuthUser)
		}
		if !s.Facts.SystemUser {
			t.Errorf("%s: Facts.SystemUser is false", s.Name)
		}
		rc, err := render.ReadConfig(s.Config, s.Facts.Version)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.Facts, rc.Facts); diff != "" {
			t.Errorf("%s: the facts read back differ from the rendered ones (-rendered +read):\n%s", s.Name, diff)
		}
	}
}

func TestWithoutASystemUserNoAccountsBlockIsRendered(t *testing.T) {
	out, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo", rt.JetStream())})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Servers {
		if strings.Contains(string(s.Config), `"accounts"`) || s.Facts.SystemUser {
			t.Errorf("%s: an accounts block or the SystemUser fact without a system user:\n%s", s.Name, s.Config)
		}
	}
}

func TestAnotherPasswordHashChangesTheRevisionButNoFact(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.JetStream())
	a, err := render.Render(render.Input{Cluster: nc, SystemUser: rt.SystemUser()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := render.Render(render.Input{Cluster: nc, SystemUser: rt.RotatedSystemUser()})
	if err != nil {
		t.Fatal(err)
	}
	if a.Revision == b.Revision {
		t.Errorf("both passwords render revision %s", a.Revision)
	}
	if diff := cmp.Diff(a.Servers[0].Facts, b.Servers[0].Facts); diff != "" {
		t.Errorf("facts differ (-first +rotated):\n%s", diff)
	}
}

func TestASystemUserRenderCannotUseIsRefused(t *testing.T) {
	f := rt.NewTrust(t, rt.WithAccounts("orders"))
	for _, tc := range []struct {
		name    string
		cluster *clusterv1beta1.NatsCluster
		trust   *render.Trust
		user    *render.SystemUser
		want    string
	}{
		{"a system user with spec.auth is refused", rt.NewCluster("ns", "demo", rt.Auth("t", "orders")), f.Trust(), rt.SystemUser(),
			"a system user was given but spec.auth is present"},
		{"a plaintext password is refused without printing it", rt.NewCluster("ns", "demo"), nil,
			&render.SystemUser{Name: render.SystemUserName, PasswordHash: "hunter2"}, "is not a bcrypt hash"},
		{"a system user without a name is refused", rt.NewCluster("ns", "demo"), nil,
			&render.SystemUser{PasswordHash: rt.SystemUserPasswordHash}, "has no name"},
		{"a name with a control character is refused", rt.NewCluster("ns", "demo"), nil,
			&render.SystemUser{Name: "nats\noperator", PasswordHash: rt.SystemUserPasswordHash}, "cannot hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := render.Render(render.Input{Cluster: tc.cluster, Trust: tc.trust, SystemUser: tc.user})
			if err == nil || out != nil {
				t.Fatalf("Render = %v, %v; want an error", out, err)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q, want one saying %q (and no password)", err, tc.want)
			}
		})
	}
}
