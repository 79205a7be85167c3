package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

var servers = []string{"demo-0", "demo-1", "demo-2"}

// expectedOrder is highest ordinal first, the meta leader last.
func expectedOrder(leader string) []string {
	order := []string{"demo-2", "demo-1", "demo-0"}
	if i := slices.Index(order, leader); i >= 0 {
		order = append(slices.Delete(order, i, i+1), leader)
	}
	return order
}

// waitVersion waits until status.version (every server's) is version and
// returns the cluster.
func waitVersion(ctx context.Context, t *testing.T, s *framework.Stack, version string) *clusterv1beta1.NatsCluster {
	t.Helper()
	var nc *clusterv1beta1.NatsCluster
	poll.Eventually(t, time.Minute, 250*time.Millisecond, "every server to report "+version, func() error {
		got, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if got.Status.Version != version {
			return fmt.Errorf("status.servers %+v", got.Status.Servers)
		}
		nc = got
		return nil
	})
	return nc
}

func patchCluster(ctx context.Context, t *testing.T, s *framework.Stack, patch string) {
	t.Helper()
	if _, err := s.Nats.ClusterV1beta1().NatsClusters(s.NS).Patch(ctx, "demo", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching NatsCluster with %s: %v", patch, err)
	}
}

// startLoadedCluster brings up the example cluster on version (edits change
// it further) with an R3 stream ORDERS and a publisher writing to it
// without pause.
func startLoadedCluster(ctx context.Context, t *testing.T, s *framework.Stack, version string, edits ...func(*unstructured.Unstructured)) (*clusterv1beta1.NatsCluster, jetstream.JetStream, *framework.Publisher) {
	t.Helper()
	nc := settledCluster(ctx, t, s, version, edits...)
	js, pub := loadCluster(ctx, t, s)
	return nc, js, pub
}

// loadCluster creates an R3 stream ORDERS on the cluster demo and starts a
// publisher writing to it without pause.
func loadCluster(ctx context.Context, t *testing.T, s *framework.Stack) (jetstream.JetStream, *framework.Publisher) {
	t.Helper()
	conn := framework.Connect(t, s.PodURLs(ctx, t, s.NS, "demo"))
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateStream(ctx, t, js, "ORDERS", 3)
	pub := framework.StartPublisher(ctx, js, "ORDERS.new")
	poll.Eventually(t, time.Minute, 100*time.Millisecond, "the publisher to get 200 acknowledgements", func() error {
		if n, attempts, failures, err := pub.Stats(); n < 200 {
			return fmt.Errorf("%d acked, %d attempts, %d failed, last error %v", n, attempts, failures, err)
		}
		return nil
	})
	return js, pub
}

// verifyNoLoss stops the publisher and checks every acknowledged message is
// in the stream.
func verifyNoLoss(ctx context.Context, t *testing.T, s *framework.Stack, pub *framework.Publisher, opts ...nats.Option) {
	t.Helper()
	verifyNoLossOf(ctx, t, s, "ORDERS", pub, opts...)
}

// verifyNoLossOf is verifyNoLoss for any stream.
func verifyNoLossOf(ctx context.Context, t *testing.T, s *framework.Stack, stream string, pub *framework.Publisher, opts ...nats.Option) {
	t.Helper()
	acked := pub.Stop()
	_, attempts, failures, _ := pub.Stats()
	// Read back on a new connection each attempt: the publisher's client
	// has followed every restart and may sit on a server that is itself
	// still catching up. A failed attempt keeps what it read.
	reader := &framework.StreamReader{Stream: stream}
	var readErr error
	defer func() {
		if t.Failed() && readErr != nil {
			s.DiagnoseServers(ctx, t, s.NS, "demo", opts...)
		}
	}()
	start, attempt := time.Now(), 0
	poll.Eventually(t, 2*time.Minute, time.Second, "reading the stream back", func() error {
		attempt++
		conn, err := nats.Connect(strings.Join(s.PodURLs(ctx, t, s.NS, "demo"), ","), append([]nats.Option{nats.Timeout(2 * time.Second)}, opts...)...)
		if err != nil {
			return err
		}
		defer conn.Close()
		fresh, err := jetstream.New(conn)
		if err != nil {
			return err
		}
		readErr = reader.Read(ctx, fresh)
		if readErr != nil {
			t.Logf("reading the stream back, attempt %d on %s: %v", attempt, conn.ConnectedServerName(), readErr)
			return fmt.Errorf("%w (on %s)", readErr, conn.ConnectedServerName())
		}
		return nil
	})
	ids, total := reader.IDs, reader.Total
	t.Logf("read %d messages back in %s (%d attempts)", len(ids), time.Since(start).Round(time.Millisecond), attempt)
	lost := 0
	for id := range acked {
		if !ids[id] {
			lost++
		}
	}
	t.Logf("publisher on %s: %d acknowledged, %d attempts (%d failed and retried); stream holds %d messages; lost %d", stream, len(acked), attempts, failures, total, lost)
	if lost != 0 {
		t.Errorf("%d acknowledged messages are missing from the stream", lost)
	}
}

// A version change 2.15.1 -> 2.15.2 restarts the servers one at a time,
// highest ordinal first and the meta leader last, each after Settled, while
// a publisher writes without pause; no acknowledged message is lost.
//
// The cluster keeps production's lame duck timings (30s and a grace period
// of 10s, not the test clusters' 1s): this is the test of a rolling restart
// under load, and the grace period is what each stopped server gives its
// clients before it closes them, so it must see what production clusters do.
func TestRollingUpgradeUnderLoad(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsRollout)
	nc, js, pub := startLoadedCluster(ctx, t, s, "2.15.1", framework.ProductionLameDuck)
	leader := nc.Status.JetStream.MetaLeader
	want := expectedOrder(leader)
	durables := createReadDurables(ctx, t, js)
	// Enough messages that reading the stream back takes some 150 fetches
	// per server: the "no responders" of issue 16 came at fetch boundaries.
	publishBulk(ctx, t, js, "ORDERS.bulk", 150000)
	t.Logf("meta leader %s; expected order %v", leader, want)

	tr, err := s.StartTracker(ctx, s.NS, "demo", servers, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Stop()

	applied := time.Now()
	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.2"}}`)

	// Record the status mid-way: once the first server has been stepped.
	var mid *clusterv1beta1.RolloutStatus
	poll.Eventually(t, 5*time.Minute, 100*time.Millisecond, "a mid-rollout status", func() error {
		got, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if got.Status.Rollout == nil {
			return errors.New("no status.rollout yet")
		}
		if r := got.Status.Rollout; len(r.Updated) > 0 || r.Current != "" && r.Gate != nil {
			mid = r.DeepCopy()
			return nil
		}
		return errors.New("no server stepped yet")
	})
	b, _ := json.Marshal(mid)
	t.Logf("status.rollout mid-way: %s", b)

	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 10*time.Minute)
	final := waitVersion(ctx, t, s, "2.15.2")
	settledAt := time.Now()
	wall := time.Since(applied)
	servedFromEveryServer(ctx, t, s, durables, settledAt)
	tr.Stop()
	verifyNoLoss(ctx, t, s, pub)

	revs := s.ServerRevisions(ctx, t, final)
	for _, srv := range final.Status.Servers {
		if srv.Version != "2.15.2" || srv.ConfigRevision != revs[srv.Name] {
			t.Errorf("server %+v after the rollout, want its revision %s", srv, revs[srv.Name])
		}
	}

	// Order and exactly-once, from the pod watch.
	if order := tr.RestartOrder(); !slices.Equal(order, want) {
		t.Errorf("servers restarted in order %v, want %v", order, want)
	}
	for pod, uids := range tr.UIDs() {
		if len(uids) != 2 {
			t.Errorf("pod %s had %d UIDs %v, want 2 (restarted exactly once)", pod, len(uids), uids)
		}
	}

	// Each step after Settled, as the test's own observer saw it; at most
	// one server silent at any moment.
	obs := tr.Observations()
	dels := tr.Deletions()
	for _, o := range obs {
		if len(o.Silent) > 1 {
			t.Errorf("at %s, %v were silent at once", o.At.Format(time.RFC3339Nano), o.Silent)
		}
	}
	for k, d := range dels {
		gateOpen := applied
		if k > 0 {
			// The gate before step k, as the test sees it: the server
			// stepped before is back (its new pod Ready, from the pod
			// informer) and the test's own observer saw the cluster Settled
			// with that server answering on 2.15.2. The controller acts
			// within milliseconds of the gate opening, faster than the
			// observer's 100 ms samples, and under load Settled flickers
			// while replicas catch up between writes, so a Settled sample
			// up to 1 s after the step counts too (the stepped server is
			// still answering in lame duck then).
			prev := dels[k-1]
			prevServer := strings.TrimSuffix(prev.Pod, "-0")
			readyAt, ok := tr.ReadyAfter(prev.Pod, prev.UID, prev.At)
			if !ok || readyAt.After(d.At.Add(200*time.Millisecond)) {
				t.Errorf("step %d (%s) at %s: %s was not Ready again before it (ready at %s)", k+1, d.Pod,
					d.At.Format(time.RFC3339Nano), prev.Pod, readyAt.Format(time.RFC3339Nano))
				continue
			}
			// Under a publisher that never pauses, Settled flickers: the
			// leader reports a follower a few in-flight writes behind
			// (GroupsCatchingUp) most of the time, and the controller steps on
			// the first Settled observation once every pod is Ready. The
			// test's observer samples every 100 ms and cannot promise to
			// catch that moment, so it requires what it can see reliably:
			// the previous server back on 2.15.2, no server silent, no
			// group leaderless and no member offline (the cluster is whole
			// and at most catching up) before the step, and it counts the
			// exactly Settled samples it saw.
			whole, settledSamples := false, 0
			for _, o := range obs {
				if !o.At.After(prev.At) || o.At.After(d.At.Add(time.Second)) || len(o.Silent) > 0 || o.Versions[prevServer] != "2.15.2" {
					continue
				}
				if o.Reason == clusterv1beta1.ReasonAllGroupsCurrent || o.Reason == clusterv1beta1.ReasonGroupsCatchingUp {
					whole = true
				}
				if o.Settled {
					settledSamples++
				}
			}
			if !whole {
				for _, o := range obs {
					if o.At.After(prev.At) && o.At.Before(d.At.Add(time.Second)) {
						t.Logf("  observed %s: settled=%v %s silent=%v notReady=%v versions=%v", o.At.Format("15:04:05.000"), o.Settled, o.Reason, o.Silent, o.NotReady, o.Versions)
					}
				}
				t.Errorf("step %d (%s): the test's observer never saw the cluster whole with %s on 2.15.2 before it", k+1, d.Pod, prevServer)
				continue
			}
			t.Logf("step %d: %d exactly Settled samples of the test's observer between the previous step and this one", k+1, settledSamples)
			gateOpen = readyAt
		}
		t.Logf("step %d: restarted %s %s after the gate opened", k+1, d.Pod, d.At.Sub(gateOpen).Round(time.Millisecond))
	}
	t.Logf("rollout wall time: %s", wall.Round(time.Millisecond))
}

// createReadDurables creates one durable pull consumer per server on
// ORDERS (R3, like the stream, no acks), before the rollout moves their
// leaders.
func createReadDurables(ctx context.Context, t *testing.T, js jetstream.JetStream) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, srv := range servers {
		name := "READ-" + srv
		if _, err := js.CreateOrUpdateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckNonePolicy}); err != nil {
			t.Fatal(err)
		}
		out[srv] = name
	}
	return out
}

// servedFromEveryServer checks, right after the rollout is Settled, that
// consumers are served from every server (issue 16): from a fresh connection
// to each server alone, (1) consecutive Fetch(1000) calls on a durable pull
// consumer created before the rollout read the stream to its end, every one
// succeeding, and (2) one Read of the framework's StreamReader (an ordered
// consumer) reads the whole stream without a retry. Nothing is retried: a
// "no responders" fails the test. The time from Settled to done is logged.
func servedFromEveryServer(ctx context.Context, t *testing.T, s *framework.Stack, durables map[string]string, settledAt time.Time) {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods(s.NS).List(ctx, metav1.ListOptions{LabelSelector: "cluster.nats-operator.io/cluster=demo"})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		server := strings.TrimSuffix(pod.Name, "-0")
		conn, err := nats.Connect("nats://"+pod.Status.PodIP+":4222", nats.Timeout(2*time.Second), nats.NoReconnect())
		if err != nil {
			t.Fatalf("connecting to %s: %v", server, err)
		}
		js, err := jetstream.New(conn)
		if err != nil {
			t.Fatal(err)
		}
		stream, err := js.Stream(ctx, "ORDERS")
		if err != nil {
			t.Fatalf("%s: %v", server, err)
		}
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatalf("%s: %v", server, err)
		}
		last := info.State.LastSeq

		cons, err := js.Consumer(ctx, "ORDERS", durables[server])
		if err != nil {
			t.Fatalf("%s: %v", server, err)
		}
		fetches, failed, seq := 0, 0, uint64(0)
		for seq < last && failed == 0 {
			fetches++
			batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
			if err == nil {
				for m := range batch.Messages() {
					if md, err := m.Metadata(); err == nil {
						seq = md.Sequence.Stream
					}
				}
				err = batch.Error()
			}
			if err != nil && !errors.Is(err, nats.ErrTimeout) {
				failed++
				t.Errorf("%s: fetch %d on durable %s after sequence %d of %d, %s after Settled: %v",
					server, fetches, durables[server], seq, last, time.Since(settledAt).Round(time.Millisecond), err)
			}
		}
		durableDone := time.Since(settledAt)

		reader := &framework.StreamReader{Stream: "ORDERS"}
		if err := reader.Read(ctx, js); err != nil {
			t.Errorf("%s: one Read of the stream on a fresh connection, %s after Settled: %v", server, time.Since(settledAt).Round(time.Millisecond), err)
		}
		t.Logf("served from %s: %d consecutive fetches on a durable to sequence %d, %d failed, done %s after Settled; ordered-consumer read of %d messages done %s after Settled (%d errors nats.go recovered from)",
			server, fetches, seq, failed, durableDone.Round(time.Millisecond), len(reader.IDs), time.Since(settledAt).Round(time.Millisecond), reader.ConsumerErrors)
		conn.Close()
	}
}

// publishBulk publishes n small messages without message IDs and waits for
// every acknowledgement.
func publishBulk(ctx context.Context, t *testing.T, js jetstream.JetStream, subject string, n int) {
	t.Helper()
	start := time.Now()
	for i := 0; i < n; i++ {
		for {
			_, err := js.PublishAsync(subject, []byte("bulk"))
			if err == nil {
				break
			}
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				t.Fatalf("bulk message %d: %v", i, err)
			}
			// The window of unacknowledged messages is full: let acks in.
			<-time.After(10 * time.Millisecond)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	t.Logf("published %d bulk messages in %s", n, time.Since(start).Round(time.Millisecond))
}
