package sysuser

// A minted user against real servers: an operator-mode cluster that
// pkg/render renders and rendertest runs in process. pkg/observe and
// pkg/act send the controller's requests with it, as the controller does.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/pkg/act"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// Every request the controller sends over the system account works with a
// minted user's permissions, answered by the servers: the connection's
// system account check, ServerID, a reload, the JSZ fan-out, the meta
// leader's step-down, an evacuation and a peer removal (of a server that is
// not a member: the meta leader's ErrNotMember is its answer). What the
// controller does not send is refused: a STATSZ or CONNZ fan-out gets no
// reply, where a user of the same account without permissions gets every
// server's, and a subscription to the account's events is a permissions
// violation.
func TestAMintedUserSendsTheControllersRequestsOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-servers")
	}
	f := rt.NewTrust(t)
	nc := rt.NewCluster("ns", "demo", rt.Replicas(3), rt.JetStream(), rt.Auth("trust"))
	out, err := render.Render(render.Input{Cluster: nc, Trust: f.Trust()})
	if err != nil {
		t.Fatal(err)
	}
	lc := rt.StartLocalCluster(t, out, nc.Namespace, nc.Name)
	names := make([]string, len(out.Servers))
	target := observe.Target{Cluster: nc.Namespace + "/" + nc.Name}
	for i, s := range out.Servers {
		names[i] = s.Name
		l := lc.Locals[i]
		target.Servers = append(target.Servers, observe.ServerAddr{Name: s.Name, Host: l.Host, MonitorPort: l.MonitorPort, ClientPort: l.ClientPort})
	}
	leader := func() string {
		var leader string
		poll.Eventually(t, 30*time.Second, 50*time.Millisecond, "a JetStream meta leader every server sees", func() error {
			leader = ""
			for i, s := range lc.Servers {
				jsz, err := s.Jsz(&server.JSzOptions{})
				if err != nil {
					return err
				}
				if jsz.Meta == nil || jsz.Meta.Leader == "" || jsz.Meta.Size != len(names) {
					return fmt.Errorf("%s sees meta %+v", names[i], jsz.Meta)
				}
				if leader != "" && jsz.Meta.Leader != leader {
					return fmt.Errorf("%s sees meta leader %s, another sees %s", names[i], jsz.Meta.Leader, leader)
				}
				leader = jsz.Meta.Leader
			}
			return nil
		})
		return leader
	}
	first := leader()

	signer, err := NewSigner(f.System.Seed, f.System.JWT)
	if err != nil {
		t.Fatal(err)
	}
	u, err := signer.Mint(render.SystemUserName, time.Now(), 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := observe.New(observe.Options{})
	t.Cleanup(o.Close)
	minted := target
	minted.SystemCredentials = u.Creds
	sys, err := o.System(ctx, minted) // the system account check: $SYS.REQ.SERVER.<id>.IDZ
	if err != nil {
		t.Fatalf("connecting with the minted user: %v", err)
	}

	// The routes (and the system account's interest across them) may not
	// be complete right after the start: the first fan-out is waited for.
	poll.Eventually(t, 30*time.Second, 100*time.Millisecond, "ServerID of every server (PING.IDZ)", func() error {
		for _, n := range names {
			if _, err := sys.ServerID(ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	if err := act.Reload(ctx, sys, "demo-1"); err != nil {
		t.Errorf("Reload ($SYS.REQ.SERVER.<id>.RELOAD): %v", err)
	}
	if f, err := sys.Ping(ctx, observe.PingJsz, first); err != nil || len(f.Replies) != 1 || f.Replies[0].Error != "" {
		t.Errorf("the JSZ fan-out to the meta leader %s: %+v, %v; want its reply", first, f, err)
	}
	if err := act.StepDownMetaLeader(ctx, sys, ""); err != nil {
		t.Errorf("StepDownMetaLeader ($JS.API.META.LEADER.STEPDOWN): %v", err)
	}
	t.Logf("meta leader %s stepped down; now %s", first, leader())
	if err := act.Evacuate(ctx, sys, "demo-9"); !errors.Is(err, act.ErrNotMember) {
		t.Errorf("Evacuate of a server that is not a member ($JS.API.SERVER.EVACUATE): %v, want the meta leader's ErrNotMember", err)
	}
	if err := act.RemovePeer(ctx, sys, "demo-9"); !errors.Is(err, act.ErrNotMember) {
		t.Errorf("RemovePeer of a server that is not a member ($JS.API.SERVER.REMOVE): %v, want the meta leader's ErrNotMember", err)
	}

	// What the controller does not send: no reply for the minted user,
	// every server's for a user of the account without permissions.
	full := target
	full.Cluster += "-full"
	full.SystemCredentials = f.System.UserCreds(t, "unrestricted")
	unrestricted, err := o.System(ctx, full)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{observe.PingStatsz, "CONNZ"} {
		if f, err := unrestricted.Ping(ctx, kind, names...); err != nil || len(f.Missing) != 0 {
			t.Errorf("%s fan-out of a user without permissions: %+v, %v; want every server's reply", kind, f, err)
		}
		if f, err := sys.Ping(ctx, kind, names...); err != nil || len(f.Replies) != 0 {
			t.Errorf("%s fan-out of the minted user: %+v, %v; want no reply", kind, f, err)
		}
	}

	// A subscription to the system account's events.
	var mu sync.Mutex
	var violations []string
	raw, err := nats.Connect(lc.ClientURLs(), nats.UserJWTAndSeed(userJWTAndSeed(t, u.Creds)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			defer mu.Unlock()
			violations = append(violations, err.Error())
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.SubscribeSync("$SYS.ACCOUNT.>"); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 10*time.Second, 20*time.Millisecond, "a permissions violation for $SYS.ACCOUNT.>", func() error {
		mu.Lock()
		defer mu.Unlock()
		if !slices.ContainsFunc(violations, func(v string) bool {
			return strings.Contains(strings.ToLower(v), "permissions violation") && strings.Contains(v, "$SYS.ACCOUNT.>")
		}) {
			return fmt.Errorf("errors so far: %q", violations)
		}
		return nil
	})
}

// userJWTAndSeed are the JWT and seed of a creds file.
func userJWTAndSeed(t *testing.T, creds []byte) (string, string) {
	t.Helper()
	token, err := jwt.ParseDecoratedJWT(creds)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := jwt.ParseDecoratedUserNKey(creds)
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	return token, string(seed)
}
