package render_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-operator/nats-operator/internal/poll"

	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// liveTimeout bounds each wait on the servers (an upper bound: a passing
// run takes seconds; a loaded 2-core machine has needed more than 45 s).
const liveTimeout = 90 * time.Second

// waitForMesh waits until every server routes to every other one by name.
func waitForMesh(t *testing.T, lc *rt.LocalCluster, out *render.Output) {
	t.Helper()
	poll.Eventually(t, liveTimeout, 50*time.Millisecond, "full route mesh", func() error {
		for i, s := range lc.Servers {
			rz, err := s.Routez(&server.RoutezOptions{})
			if err != nil {
				return err
			}
			var peers []string
			for _, r := range rz.Routes {
				if !slices.Contains(peers, r.RemoteName) {
					peers = append(peers, r.RemoteName)
				}
			}
			for j, o := range out.Servers {
				if j != i && !slices.Contains(peers, o.Name) {
					return fmt.Errorf("%s has no route to %s (routes to %v)", out.Servers[i].Name, o.Name, peers)
				}
			}
		}
		return nil
	})
}

// waitForMeta waits until every server sees the same meta leader in a meta
// group of all servers.
func waitForMeta(t *testing.T, lc *rt.LocalCluster, out *render.Output) string {
	t.Helper()
	var leader string
	poll.Eventually(t, liveTimeout, 50*time.Millisecond, "JetStream meta group of every server", func() error {
		leader = ""
		for i, s := range lc.Servers {
			jsz, err := s.Jsz(&server.JSzOptions{})
			if err != nil {
				return err
			}
			name := out.Servers[i].Name
			if jsz.Meta == nil || jsz.Meta.Leader == "" {
				return fmt.Errorf("%s sees no meta leader", name)
			}
			if jsz.Meta.Size != len(out.Servers) {
				return fmt.Errorf("%s sees a meta group of %d", name, jsz.Meta.Size)
			}
			if leader != "" && jsz.Meta.Leader != leader {
				return fmt.Errorf("%s sees meta leader %s, another sees %s", name, jsz.Meta.Leader, leader)
			}
			leader = jsz.Meta.Leader
		}
		return nil
	})
	return leader
}

func checkReportedRevision(t *testing.T, lc *rt.LocalCluster, out *render.Output) {
	t.Helper()
	for i, s := range lc.Servers {
		v, err := s.Varz(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.Metadata["config_revision"]; got != out.Servers[i].Revision {
			t.Errorf("%s reports config revision %q, want %q", out.Servers[i].Name, got, out.Servers[i].Revision)
		}
	}
}

// writeR3 creates an R3 stream and publishes n messages to it, each
// acknowledged, through js.
func writeR3(t *testing.T, nc *nats.Conn, stream string, n int) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	var s jetstream.Stream
	poll.Eventually(t, liveTimeout, 50*time.Millisecond, "creating an R3 stream", func() error {
		// Each attempt on its own short deadline: a request the meta
		// leader does not answer yet (seen on a loaded machine) must not
		// use up the whole wait.
		attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err = js.CreateOrUpdateStream(attempt, jetstream.StreamConfig{
			Name: stream, Subjects: []string{stream + ".>"}, Replicas: 3, Storage: jetstream.FileStorage,
		})
		return err
	})
	for i := range n {
		if _, err := js.Publish(ctx, fmt.Sprintf("%s.%d", stream, i), []byte("hello"),
			jetstream.WithRetryAttempts(40), jetstream.WithRetryWait(100*time.Millisecond)); err != nil {
			t.Fatalf("publishing message %d: %v", i, err)
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(n) {
		t.Errorf("stream %s holds %d messages, want %d", stream, info.State.Msgs, n)
	}
	if info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Errorf("stream %s cluster = %+v, want a leader and 2 replicas", stream, info.Cluster)
	}
}

func TestRenderedServersFormAClusterWithJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-servers")
	}
	nc := rt.NewCluster("ns", "demo", rt.Replicas(3), rt.Claim("1Gi", ""), rt.MemoryLimit("1Gi"), rt.ServerTag("az", "a"))
	out, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	lc := rt.StartLocalCluster(t, out, nc.Namespace, nc.Name)
	waitForMesh(t, lc, out)
	leader := waitForMeta(t, lc, out)
	t.Logf("meta leader %s", leader)
	checkReportedRevision(t, lc, out)

	conn, err := nats.Connect(lc.ClientURLs())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	writeR3(t, conn, "ORDERS", 100)
}

func TestRenderedServersInOperatorMode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-servers")
	}
	f := rt.NewTrust(t, rt.WithAccounts("orders", "events"))
	nc := rt.NewCluster("ns", "demo", rt.Replicas(3), rt.JetStream(), rt.Auth("trust", "orders", "events"))
	out, err := render.Render(render.Input{Cluster: nc, Trust: f.Trust()})
	if err != nil {
		t.Fatal(err)
	}
	lc := rt.StartLocalCluster(t, out, nc.Namespace, nc.Name)
	waitForMesh(t, lc, out)
	waitForMeta(t, lc, out)
	checkReportedRevision(t, lc, out)

	credsFile := func(creds []byte) string {
		p := filepath.Join(t.TempDir(), "user.creds")
		if err := os.WriteFile(p, creds, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("a system account user gets STATSZ from every server", func(t *testing.T) {
		sys, err := nats.Connect(lc.ClientURLs(), nats.UserCredentials(credsFile(f.System.UserCreds(t, "sys"))))
		if err != nil {
			t.Fatal(err)
		}
		defer sys.Close()
		poll.Eventually(t, liveTimeout, 50*time.Millisecond, "STATSZ from every server", func() error {
			inbox := nats.NewInbox()
			sub, err := sys.SubscribeSync(inbox)
			if err != nil {
				return err
			}
			defer sub.Unsubscribe()
			if err := sys.PublishRequest("$SYS.REQ.SERVER.PING.STATSZ", inbox, nil); err != nil {
				return err
			}
			var names []string
			for len(names) < len(out.Servers) {
				msg, err := sub.NextMsg(2 * time.Second)
				if err != nil {
					return fmt.Errorf("answers from %v only: %w", names, err)
				}
				var resp struct {
					Server struct {
						Name     string            `json:"name"`
						Metadata map[string]string `json:"metadata"`
					} `json:"server"`
				}
				if err := json.Unmarshal(msg.Data, &resp); err != nil {
					return err
				}
				i, ok := render.ServerOrdinal(nc.Name, resp.Server.Name)
				if !ok || int(i) >= len(out.Servers) {
					return fmt.Errorf("an unknown server %q answered STATSZ", resp.Server.Name)
				}
				if got, want := resp.Server.Metadata["config_revision"], out.Servers[i].Revision; got != want {
					return fmt.Errorf("%s reports revision %q over STATSZ, want %q", resp.Server.Name, got, want)
				}
				if !slices.Contains(names, resp.Server.Name) {
					names = append(names, resp.Server.Name)
				}
			}
			slices.Sort(names)
			if want := []string{"demo-0", "demo-1", "demo-2"}; !slices.Equal(names, want) {
				return fmt.Errorf("answers from %v, want %v", names, want)
			}
			return nil
		})
	})

	t.Run("a user of a preloaded account connects, publishes and writes to JetStream", func(t *testing.T) {
		orders := f.Accounts[0]
		sub, err := nats.Connect(lc.Locals[0].ClientURL(), nats.UserCredentials(credsFile(orders.UserCreds(t, "reader"))))
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		pub, err := nats.Connect(lc.Locals[2].ClientURL(), nats.UserCredentials(credsFile(orders.UserCreds(t, "writer"))))
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		s, err := sub.SubscribeSync("greetings")
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.Flush(); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, liveTimeout, 50*time.Millisecond, "a message across servers within the account", func() error {
			if err := pub.Publish("greetings", []byte("hello")); err != nil {
				return err
			}
			_, err := s.NextMsg(500 * time.Millisecond)
			return err
		})
		writeR3(t, pub, "ORDERS", 10)
	})
}
