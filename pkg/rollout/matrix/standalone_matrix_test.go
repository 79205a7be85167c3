package matrix

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	. "github.com/nats-operator/nats-operator/pkg/rollout"
)

// The standalone matrix: one JetStream server (spec.replicas 1) is rendered
// without a cluster block and runs standalone; the same NatsCluster at 3
// replicas renders server 0 with one. Between the two, Classify finds
// ChangeStandalone, and EffectOf says it splits and resets JetStream.
// TestStandaloneServerJoiningACluster measures both directions on real
// nats-server processes, server 0 keeping its store: the standalone
// server's streams are not in the meta group the three servers form, so
// nats-server hides them from the JetStream API at once and deletes them
// from disk as orphans (checkForOrphans, 30 s after the meta group
// recovered); and a cluster's server 0 restarted standalone loads its R1
// streams but not a stream of 3 replicas, whose files stay on its volume,
// unreachable. Either is a reset of JetStream for the planner.

// Streams of the standalone matrix: ORDERS lives on the standalone server;
// R3S (3 replicas) and R1S (1 replica, on server 0) on the cluster.
const (
	soloStream, soloSubjects = "ORDERS", "orders.>"
	soloDurable              = "shipper"
	soloMessages             = 1000
	r3Stream, r3Subjects     = "R3S", "r3.>"
	r1Stream, r1Subjects     = "R1S", "r1.>"
	clusterMessages          = 100
	// orphanWait is how long after server 0 joins the cluster the test
	// waits for ORDERS to be deleted (nats-server: 30 s after the meta
	// group recovered).
	orphanWait = 60 * time.Second
)

// TestStandaloneServerJoiningACluster proves ChangeStandalone's effect:
// one standalone JetStream server scaled to three (its streams are hidden,
// then deleted as orphans), and three scaled back to one (a stream of more
// than one replica is not loaded and stays on the volume).
func TestStandaloneServerJoiningACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real nats-server processes; skipped with -short")
	}
	t.Parallel()
	limits := rendertest.JetStreamLimits("256Mi", "1Gi")
	solo := matrixSpec{cluster: rendertest.NewCluster(matrixNamespace, "solo", limits, rendertest.Replicas(1))}
	three := matrixSpec{cluster: rendertest.NewCluster(matrixNamespace, "solo", limits)}
	soloOut, threeOut := solo.render(t), three.render(t)
	if len(soloOut.Servers) != 1 || len(threeOut.Servers) != 3 {
		t.Fatalf("rendered %d and %d servers, want 1 and 3", len(soloOut.Servers), len(threeOut.Servers))
	}
	if a, b := soloOut.Servers[0].Name, threeOut.Servers[0].Name; a != b {
		t.Fatalf("server 0 is %s standalone and %s clustered: they must be the same server", a, b)
	}
	standalone, clustered := serverFacts(soloOut.Servers[0]), serverFacts(threeOut.Servers[0])
	if standalone.ClusterName != "" || clustered.ClusterName == "" || !standalone.JetStream || !clustered.JetStream {
		t.Fatalf("facts: standalone cluster name %q JetStream %t; clustered cluster name %q JetStream %t",
			standalone.ClusterName, standalone.JetStream, clustered.ClusterName, clustered.JetStream)
	}

	// a) the planner's table.
	for _, d := range []struct {
		name     string
		from, to ConfigFacts
	}{{"standalone to clustered", standalone, clustered}, {"clustered to standalone", clustered, standalone}} {
		var kinds []ChangeKind
		for _, c := range Classify(d.from, d.to) {
			kinds = append(kinds, c.Kind)
		}
		if !slices.Equal(kinds, []ChangeKind{ChangeStandalone}) {
			t.Fatalf("%s: Classify = %v, want exactly [%s]", d.name, kinds, ChangeStandalone)
		}
	}
	if e := EffectOf(ChangeStandalone); !e.Splits || !e.ResetsJetStream {
		t.Fatalf("EffectOf(%s) = Splits %t, ResetsJetStream %t; the servers below split and reset JetStream", ChangeStandalone, e.Splits, e.ResetsJetStream)
	}

	bins := map[string]string{rendertest.DefaultVersion: natsBinary(t, rendertest.DefaultVersion)}
	places := func(t *testing.T) ([]*natsServer, serverRun, []serverRun) {
		locals, routes := rendertest.LocalAddresses(t, threeOut, matrixNamespace, three.cluster.Name)
		clusteredRuns := serverRuns(t, three, threeOut, bins, locals, routes, nil)
		// The standalone server is server 0: its place and its store.
		soloRun := serverRuns(t, solo, soloOut, bins, locals[:1], routes, nil)[0]
		servers := make([]*natsServer, len(locals))
		for i, l := range locals {
			servers[i] = &natsServer{local: l}
		}
		t.Cleanup(func() {
			for _, s := range servers {
				s.stop()
			}
		})
		return servers, soloRun, clusteredRuns
	}

	// b) one standalone server becomes three.
	t.Run("one to three", func(t *testing.T) {
		t.Parallel()
		servers, soloRun, clusteredRuns := places(t)
		s0 := servers[0]
		s0.start(t, soloRun)
		soloCreateStream(t, s0, jetstream.StreamConfig{Name: soloStream, Subjects: []string{soloSubjects}, Replicas: 1, Storage: jetstream.FileStorage},
			"orders.new", soloMessages, soloDurable)
		store := streamStore(s0.local, soloStream)
		if n := storeFiles(store); n == 0 {
			t.Fatalf("no store of %s at %s on the standalone server: the harness looks in the wrong place", soloStream, store)
		}
		s0.stop()

		restarted := time.Now()
		for i, s := range servers {
			s.start(t, clusteredRuns[i])
		}
		if !waitMetaWhole(servers, 30*time.Second) {
			_, detail := metaWhole(servers)
			t.Fatalf("the three servers formed no meta group: %s", detail)
		}
		formed := time.Now()
		m, _ := s0.meta()
		t.Logf("meta leader %s (cluster size %d) %s after server 0 restarted clustered", m.Leader, m.Size, formed.Sub(restarted).Round(100*time.Millisecond))

		// Hidden from the API at once, though server 0 still runs it.
		names := apiStreamNames(t, s0)
		info := apiStreamInfo(t, s0, soloStream)
		onJsz, _ := jszStreamNames(s0)
		t.Logf("after the join: STREAM.NAMES through %s: %v; STREAM.INFO %s: %s; %s's /jsz lists %v",
			s0.name(), names, soloStream, info, s0.name(), onJsz)
		if slices.Contains(names, soloStream) || !info.notFound() {
			t.Errorf("the cluster's meta group knows the standalone server's stream %s (STREAM.NAMES %v, STREAM.INFO %s): "+
				"nats-server may now adopt a standalone server's streams; ChangeStandalone's ResetsJetStream should be revisited", soloStream, names, info)
		}

		// Deleted from server 0 as an orphan.
		gone := time.Time{}
		for time.Since(restarted) < orphanWait {
			if listed, err := jszStreamNames(s0); err == nil && !slices.Contains(listed, soloStream) {
				gone = time.Now()
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if gone.IsZero() {
			t.Fatalf("%s is still on %s (/jsz?streams=true) %s after it joined the cluster: nats-server no longer deletes a standalone server's "+
				"streams as orphans; the table (ChangeStandalone: ResetsJetStream, its Why) should be revisited", soloStream, s0.name(), orphanWait)
		}
		t.Logf("%s gone from %s's /jsz %s after the restart, %s after the meta group formed",
			soloStream, s0.name(), gone.Sub(restarted).Round(100*time.Millisecond), gone.Sub(formed).Round(100*time.Millisecond))
		// The durable goes with its stream: nats-server logs the stream
		// alone ("Recovered JetStream cluster metadata", which starts the
		// 30 s, is a debug line the rendered config does not log).
		if lines := logLinesWith(s0.local, "Detected orphaned"); len(lines) > 0 {
			for _, l := range lines {
				t.Logf("%s's log: %s", s0.name(), l)
			}
		} else {
			t.Logf("%s's log has no line about an orphan", s0.name())
		}
		// The store itself is deleted (mset.delete, after /jsz stops
		// listing the stream).
		deadline := time.Now().Add(5 * time.Second)
		for storeFiles(store) > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if n := storeFiles(store); n > 0 {
			t.Errorf("%s's store %s still has %d files after the orphan was removed: the data stays on the volume; revisit ChangeStandalone's Why", soloStream, store, n)
		} else if _, err := os.Stat(store); errors.Is(err, fs.ErrNotExist) {
			t.Logf("%s's store %s: absent", soloStream, store)
		} else {
			t.Logf("%s's store %s: empty", soloStream, store)
		}
		if names := apiStreamNames(t, s0); slices.Contains(names, soloStream) {
			t.Errorf("STREAM.NAMES lists %s after the orphan was removed: %v", soloStream, names)
		}
	})

	// c) three servers become one: server 0 restarted standalone.
	t.Run("three to one", func(t *testing.T) {
		t.Parallel()
		servers, soloRun, clusteredRuns := places(t)
		s0 := servers[0]
		for i, s := range servers {
			s.start(t, clusteredRuns[i])
		}
		if !waitMetaWhole(servers, 30*time.Second) {
			_, detail := metaWhole(servers)
			t.Fatalf("the three servers formed no meta group: %s", detail)
		}
		soloCreateStream(t, s0, jetstream.StreamConfig{Name: r3Stream, Subjects: []string{r3Subjects}, Replicas: 3, Storage: jetstream.FileStorage},
			"r3.new", clusterMessages, "")
		// An R1 stream on server 0: the meta leader places it at random
		// (every server has the same tags), so create it until it lands
		// there.
		placed := false
		for attempt := 1; attempt <= 40 && !placed; attempt++ {
			leader := soloCreateStream(t, s0, jetstream.StreamConfig{Name: r1Stream, Subjects: []string{r1Subjects}, Replicas: 1, Storage: jetstream.FileStorage},
				"", 0, "")
			if leader == s0.name() {
				placed = true
				t.Logf("%s placed on %s at attempt %d", r1Stream, leader, attempt)
				break
			}
			soloDeleteStream(t, s0, r1Stream)
		}
		if !placed {
			t.Fatalf("%s never landed on %s in 40 attempts", r1Stream, s0.name())
		}
		soloPublish(t, s0, "r1.new", clusterMessages)
		r3Store := streamStore(s0.local, r3Stream)
		if n := storeFiles(r3Store); n == 0 {
			t.Fatalf("no store of %s at %s on %s: the harness looks in the wrong place", r3Stream, r3Store, s0.name())
		}
		for i := len(servers) - 1; i >= 0; i-- {
			servers[i].stop()
		}

		s0.start(t, soloRun)
		r1 := apiStreamInfo(t, s0, r1Stream)
		for deadline := time.Now().Add(10 * time.Second); !r1.has(clusterMessages) && time.Now().Before(deadline); {
			time.Sleep(250 * time.Millisecond)
			r1 = apiStreamInfo(t, s0, r1Stream)
		}
		r3 := apiStreamInfo(t, s0, r3Stream)
		names := apiStreamNames(t, s0)
		t.Logf("%s standalone: STREAM.NAMES %v; STREAM.INFO %s: %s; STREAM.INFO %s: %s", s0.name(), names, r1Stream, r1, r3Stream, r3)
		if lines := logLinesWith(s0.local, "replicas > 1 not supported in non-clustered mode"); len(lines) > 0 {
			t.Logf("%s's log: %s", s0.name(), lines[0])
		} else {
			t.Logf("%s's log has no line about %s's replicas", s0.name(), r3Stream)
		}
		if !r1.has(clusterMessages) {
			t.Errorf("the R1 stream %s that lived on %s did not load with its %d messages on the standalone config (%s): "+
				"nats-server's behaviour changed; ChangeStandalone's Why should be revisited", r1Stream, s0.name(), clusterMessages, r1)
		}
		if !r3.notFound() || slices.Contains(names, r3Stream) {
			t.Errorf("the R3 stream %s loaded on the standalone server (%s): nats-server now runs a stream of 3 replicas standalone; "+
				"ChangeStandalone's ResetsJetStream for three servers becoming one should be revisited", r3Stream, r3)
		}
		if n := storeFiles(r3Store); n == 0 {
			t.Errorf("%s's store %s is gone from %s's volume: the standalone server deletes it rather than leaving it unreachable; revisit ChangeStandalone's Why",
				r3Stream, r3Store, s0.name())
		} else {
			t.Logf("%s's store stays on %s's volume: %d files under %s", r3Stream, s0.name(), n, r3Store)
		}
	})
}

// waitMetaWhole polls metaWhole until it holds or the wait runs out.
func waitMetaWhole(servers []*natsServer, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		if ok, _ := metaWhole(servers); ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// soloClient connects to a server with nats.go's jetstream API.
func soloClient(s *natsServer) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(s.url(), s.running.clientOptions()...)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// soloCreateStream creates a stream through the server (retrying while
// JetStream settles), writes n messages on subject and, with durable, adds
// that durable consumer; it returns the stream's leader ("" standalone).
func soloCreateStream(t *testing.T, s *natsServer, cfg jetstream.StreamConfig, subject string, n int, durable string) string {
	t.Helper()
	var leader string
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := func() error {
			nc, js, err := soloClient(s)
			if err != nil {
				return err
			}
			defer nc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			st, err := js.CreateOrUpdateStream(ctx, cfg)
			if err != nil {
				return err
			}
			info, err := st.Info(ctx)
			if err != nil {
				return err
			}
			if info.Cluster != nil {
				leader = info.Cluster.Leader
			}
			if durable != "" {
				if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: durable, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
					return fmt.Errorf("durable %s: %w", durable, err)
				}
			}
			return nil
		}()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("creating the stream %s through %s: %v", cfg.Name, s.name(), err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if n > 0 {
		soloPublish(t, s, subject, n)
	}
	return leader
}

// soloPublish writes n messages on subject through the server and checks
// that the stream of the subject holds at least n.
func soloPublish(t *testing.T, s *natsServer, subject string, n int) {
	t.Helper()
	nc, js, err := soloClient(s)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for i := range n {
		if _, err := js.PublishAsync(subject, fmt.Appendf(nil, "message %d", i)); err != nil {
			t.Fatalf("publishing on %s through %s: %v", subject, s.name(), err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(20 * time.Second):
		t.Fatalf("%d messages on %s through %s: not all acknowledged in 20 s", n, subject, s.name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	name, err := js.StreamNameBySubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs < uint64(n) {
		t.Fatalf("%s holds %d messages after %d were acknowledged", name, info.State.Msgs, n)
	}
}

func soloDeleteStream(t *testing.T, s *natsServer, name string) {
	t.Helper()
	nc, js, err := soloClient(s)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, name); err != nil {
		t.Fatalf("deleting %s: %v", name, err)
	}
}

// apiAnswer is what the JetStream API ($JS.API.STREAM.*) answered.
type apiAnswer struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
	Streams []string `json:"streams"`
	State   *struct {
		Msgs uint64 `json:"messages"`
	} `json:"state"`
}

// notFound: the API answered 404 stream not found (err_code 10059).
func (a apiAnswer) notFound() bool {
	return a.Error != nil && a.Error.Code == 404 && a.Error.ErrCode == int(jetstream.JSErrCodeStreamNotFound)
}

// has: the stream answered with at least n messages.
func (a apiAnswer) has(n int) bool {
	return a.Error == nil && a.State != nil && a.State.Msgs >= uint64(n)
}

func (a apiAnswer) String() string {
	switch {
	case a.Error != nil:
		return fmt.Sprintf("%d err_code %d %q", a.Error.Code, a.Error.ErrCode, a.Error.Description)
	case a.State != nil:
		return fmt.Sprintf("found, %d messages", a.State.Msgs)
	}
	return "answered"
}

// jsAPI asks the JetStream API through the server, as a client of the
// config it runs, until it answers other than "unavailable" (10 s).
func jsAPI(t *testing.T, s *natsServer, subject string) apiAnswer {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		a, err := func() (apiAnswer, error) {
			nc, err := nats.Connect(s.url(), s.running.clientOptions()...)
			if err != nil {
				return apiAnswer{}, err
			}
			defer nc.Close()
			msg, err := nc.Request(subject, nil, 2*time.Second)
			if err != nil {
				return apiAnswer{}, err
			}
			var a apiAnswer
			if err := json.Unmarshal(msg.Data, &a); err != nil {
				return apiAnswer{}, fmt.Errorf("%s: %w: %s", subject, err, msg.Data)
			}
			if a.Error != nil && a.Error.Code == 503 {
				return apiAnswer{}, errors.New(a.Error.Description)
			}
			return a, nil
		}()
		if err == nil {
			return a
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s through %s: no answer in 10 s: %v", subject, s.name(), last)
	return apiAnswer{}
}

// apiStreamNames are the streams $JS.API.STREAM.NAMES lists through the
// server, sorted.
func apiStreamNames(t *testing.T, s *natsServer) []string {
	t.Helper()
	a := jsAPI(t, s, "$JS.API.STREAM.NAMES")
	if a.Error != nil {
		t.Fatalf("STREAM.NAMES through %s: %s", s.name(), a)
	}
	return slices.Sorted(slices.Values(a.Streams))
}

// apiStreamInfo is $JS.API.STREAM.INFO of the stream through the server.
func apiStreamInfo(t *testing.T, s *natsServer, stream string) apiAnswer {
	t.Helper()
	return jsAPI(t, s, "$JS.API.STREAM.INFO."+stream)
}

// jszStreamNames are the streams the server itself runs, as its
// /jsz?streams=true lists them (of every account), sorted.
func jszStreamNames(s *natsServer) ([]string, error) {
	b, err := s.get("/jsz?streams=true")
	if err != nil {
		return nil, err
	}
	var jz struct {
		Accounts []struct {
			Streams []struct {
				Name string `json:"name"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.Unmarshal(b, &jz); err != nil {
		return nil, err
	}
	var names []string
	for _, a := range jz.Accounts {
		for _, st := range a.Streams {
			names = append(names, st.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// streamStore is where a stream of the global account keeps its files on
// the server's volume: <store_dir>/jetstream/$G/streams/<stream>, the
// store_dir rendered under /data and localized under the place's data/.
func streamStore(l rendertest.Local, stream string) string {
	rel, _ := filepath.Rel(render.DataDir, render.JetStreamStoreDir)
	return filepath.Join(l.Dir, "data", rel, "jetstream", "$G", "streams", stream)
}

// storeFiles counts the regular files under dir (0 when it is absent).
func storeFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// logLinesWith are the lines of the server's log (server.log at its place, over
// every run) that contain s.
func logLinesWith(l rendertest.Local, s string) []string {
	f, err := os.Open(filepath.Join(l.Dir, "server.log"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}
