package observe

// Tests of System with the controller's system user (user and password, no
// creds file) against clusters that pkg/render renders and
// rendertest.StartLocalCluster runs in process. pkg/render is imported by
// these tests only: the package itself never depends on it (deps_test.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/pkg/act"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// startRenderedCluster renders three servers with JetStream limits (with the
// controller's system user when su is not nil), runs them, and returns the
// rendered output, the running cluster and its Target without credentials.
func startRenderedCluster(t *testing.T, su *render.SystemUser) (*render.Output, *rt.LocalCluster, Target) {
	t.Helper()
	nc := rt.NewCluster("ns", "demo", rt.Replicas(3), rt.JetStreamLimits("256Mi", "1Gi"))
	out, err := render.Render(render.Input{Cluster: nc, SystemUser: su})
	if err != nil {
		t.Fatalf("rendering: %v", err)
	}
	lc := rt.StartLocalCluster(t, out, nc.Namespace, nc.Name)
	target := Target{Cluster: nc.Namespace + "/" + nc.Name}
	for i, s := range out.Servers {
		l := lc.Locals[i]
		target.Servers = append(target.Servers, ServerAddr{Name: s.Name, Host: l.Host, MonitorPort: l.MonitorPort, ClientPort: l.ClientPort})
	}
	return out, lc, target
}

// configLoadTime is /varz config_load_time of one server.
func configLoadTime(t *testing.T, l rt.Local) time.Time {
	t.Helper()
	resp, err := http.Get(l.MonitorURL() + "/varz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ConfigLoadTime time.Time `json:"config_load_time"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding /varz: %v", err)
	}
	return v.ConfigLoadTime
}

// editConfig changes one server's config file in place, as a new ConfigMap
// would: decode, change, encode.
func editConfig(t *testing.T, file string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	edit(m)
	if b, err = json.MarshalIndent(m, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSystemWithTheControllersSystemUser(t *testing.T) {
	out, lc, target := startRenderedCluster(t, rt.SystemUser())
	names := make([]string, len(out.Servers))
	for i, s := range out.Servers {
		names[i] = s.Name
	}
	o := New(Options{})
	defer o.Close()
	ctx := context.Background()
	target.SystemUser, target.SystemPassword = render.SystemUserName, rt.SystemUserPassword

	sys, err := o.System(ctx, target)
	if err != nil {
		t.Fatalf("connecting to $SYS with the system user: %v", err)
	}

	t.Run("a STATSZ fan-out is answered by every server", func(t *testing.T) {
		// Right after the start the routes (and with them the system
		// account's interest) may not be complete yet.
		took := poll.Eventually(t, 30*time.Second, 100*time.Millisecond, "STATSZ from every server", func() error {
			f, err := sys.Statsz(ctx, names...)
			if err != nil {
				return err
			}
			if len(f.Missing) != 0 {
				return fmt.Errorf("no STATSZ from %v", f.Missing)
			}
			return nil
		})
		t.Logf("STATSZ answered by %v after %s", names, took.Round(time.Millisecond))
	})

	t.Run("the same credentials reuse the connection", func(t *testing.T) {
		again, err := o.System(ctx, target)
		if err != nil || again != sys {
			t.Errorf("System again = %p, %v; want the kept client %p", again, err, sys)
		}
	})

	t.Run("a reload of one server loads its config again", func(t *testing.T) {
		before := make([]time.Time, len(names))
		for i, l := range lc.Locals {
			before[i] = configLoadTime(t, l)
		}
		if err := act.Reload(ctx, sys, "demo-1"); err != nil {
			t.Fatal(err)
		}
		for i, l := range lc.Locals {
			after := configLoadTime(t, l)
			switch {
			case names[i] == "demo-1":
				t.Logf("demo-1 config_load_time %s -> %s", before[i].Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
				if !after.After(before[i]) {
					t.Errorf("config_load_time of demo-1 did not move: %s, then %s", before[i], after)
				}
			case !after.Equal(before[i]):
				t.Errorf("%s reloaded too: config_load_time %s, then %s", names[i], before[i], after)
			}
		}
	})

	t.Run("a reload the server refuses returns its error as a ReloadRefusedError", func(t *testing.T) {
		i := slices.Index(names, "demo-1")
		editConfig(t, lc.ConfigFiles[i], func(m map[string]any) {
			m["jetstream"].(map[string]any)["max_memory_store"] = 128 << 20
		})
		err := act.Reload(ctx, sys, "demo-1")
		t.Logf("Reload after lowering max_memory_store: %v", err)
		var refused *act.ReloadRefusedError
		if !errors.As(err, &refused) {
			t.Fatalf("Reload = %v; want a *ReloadRefusedError", err)
		}
		const want = "config reload not supported for decreasing jetstream max memory and store"
		if refused.Server != "demo-1" || !strings.Contains(refused.Message, want) {
			t.Errorf("refused = %+v; want server demo-1 and a message containing %q", refused, want)
		}
	})

	t.Run("an evacuation of a member is accepted, of a stranger is ErrNotMember", func(t *testing.T) {
		// Right after the start the meta group may have no leader yet: only
		// the leader answers.
		poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "Evacuate(demo-2) accepted", func() error {
			return act.Evacuate(ctx, sys, "demo-2")
		})
		err := act.Evacuate(ctx, sys, "demo-9")
		t.Logf("Evacuate(demo-9): %v", err)
		if !errors.Is(err, act.ErrNotMember) {
			t.Errorf("Evacuate(demo-9) = %v; want an error wrapping ErrNotMember", err)
		}
	})

	t.Run("a wrong password is refused and drops the kept connection", func(t *testing.T) {
		wrong := target
		wrong.SystemPassword = rt.RotatedSystemUserPassword
		got, err := o.System(ctx, wrong)
		t.Logf("System with a wrong password: %v", err)
		if err == nil {
			t.Fatalf("System with a wrong password = %p, nil; want an error", got)
		}
		if strings.Contains(err.Error(), rt.RotatedSystemUserPassword) {
			t.Errorf("the error holds the password: %v", err)
		}
		if !sys.nc.IsClosed() {
			t.Error("the connection made with the old password is still open")
		}
	})
}

func TestSystemUserOnAClusterThatDoesNotRunIt(t *testing.T) {
	_, _, target := startRenderedCluster(t, nil)
	o := New(Options{})
	defer o.Close()
	target.SystemUser, target.SystemPassword = render.SystemUserName, rt.SystemUserPassword

	sys, err := o.System(context.Background(), target)
	t.Logf("System on a cluster without the system user: %v", err)
	if !errors.Is(err, ErrNotSystemAccount) {
		t.Fatalf("System = %p, %v; want an error wrapping ErrNotSystemAccount", sys, err)
	}
	const want = "but not into the system account: the server does not run the controller's system user yet"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

func TestSystemWithoutCredentials(t *testing.T) {
	o := New(Options{})
	defer o.Close()
	target := Target{Cluster: "ns/demo", Servers: []ServerAddr{{Name: "demo-0", Host: "127.0.0.1"}}}
	for _, tc := range []struct {
		name     string
		user, pw string
		noCreds  bool
	}{
		{name: "neither a creds file nor a user is no system credentials", noCreds: true},
		{name: "a user without a password is refused", user: render.SystemUserName},
		{name: "a password without a user is refused", pw: "secret-password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := target
			tg.SystemUser, tg.SystemPassword = tc.user, tc.pw
			_, err := o.System(context.Background(), tg)
			if err == nil {
				t.Fatal("System succeeded")
			}
			if got := errors.Is(err, ErrNoSystemCredentials); got != tc.noCreds {
				t.Errorf("errors.Is(%v, ErrNoSystemCredentials) = %v, want %v", err, got, tc.noCreds)
			}
			if tc.pw != "" && strings.Contains(err.Error(), tc.pw) {
				t.Errorf("the error holds the password: %v", err)
			}
		})
	}
}
