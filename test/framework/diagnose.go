package framework

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DiagnoseServers asks each server of the cluster on its own, for a test
// that is about to fail on something the servers should have answered: a
// client connection to that server alone (with opts) and its JetStream
// account info, logged; and the server's monitoring endpoints (varz, jsz
// with accounts, accountz, routez, subsz), written to a directory kept with
// the test's logs.
func (s *Stack) DiagnoseServers(ctx context.Context, t testing.TB, namespace, cluster string, opts ...nats.Option) {
	t.Helper()
	dir := KeptDir(t, "diagnosis")
	for _, u := range s.PodURLs(ctx, t, namespace, cluster) {
		host := strings.TrimSuffix(strings.TrimPrefix(u, "nats://"), ":4222")
		conn, err := nats.Connect(u, append([]nats.Option{nats.Timeout(2 * time.Second), nats.NoReconnect()}, opts...)...)
		if err != nil {
			t.Logf("diagnosis %s: connect: %v", host, err)
		} else {
			js, _ := jetstream.New(conn)
			actx, cancel := context.WithTimeout(ctx, 3*time.Second)
			info, err := js.AccountInfo(actx)
			cancel()
			if err != nil {
				t.Logf("diagnosis %s (%s): JetStream account info: %v", host, conn.ConnectedServerName(), err)
			} else {
				t.Logf("diagnosis %s (%s): JetStream account info: %d streams, %d consumers", host, conn.ConnectedServerName(), info.Streams, info.Consumers)
			}
			conn.Close()
		}
		for _, ep := range []string{"varz", "jsz?accounts=true&streams=true&consumers=true&config=true&raft=true", "accountz", "routez?subs=1", "subsz?subs=1", "healthz"} {
			_, body, err := Get("http://" + host + ":8222/" + ep)
			if err != nil {
				body = err.Error()
			}
			name := host + "-" + strings.NewReplacer("?", "_", "&", "_", "=", "-").Replace(ep) + ".json"
			_ = os.WriteFile(filepath.Join(dir, url.PathEscape(name)), []byte(body), 0o644)
		}
	}
	t.Logf("monitoring endpoints of every server: %s", dir)
}
