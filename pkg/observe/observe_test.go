package observe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/pkg/act"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

var demo = []string{"demo-0", "demo-1", "demo-2"}

// checkSettledFacts checks what every settled 3-server snapshot must show.
func checkSettledFacts(t *testing.T, snap *Snapshot, names []string, mode, systemAccount string, streams int) {
	t.Helper()
	if snap.Verdict.Reason != clusterv1beta1.ReasonAllGroupsCurrent {
		t.Fatalf("verdict %s %s: %s", snap.Verdict.Status, snap.Verdict.Reason, snap.Verdict.Message)
	}
	for _, s := range snap.Servers {
		if !s.Answered || s.ServerID == "" || s.Version != server.VERSION || s.ConfigRevision != testRevision {
			t.Errorf("server %s: answered=%v id=%q version=%q revision=%q, want answered with version %s and revision %s",
				s.Name, s.Answered, s.ServerID, s.Version, s.ConfigRevision, server.VERSION, testRevision)
		}
		if s.Auth.Mode() != mode || s.Auth.SystemAccount != systemAccount {
			t.Errorf("server %s runs auth %s with system account %q, want %s with %q", s.Name, s.Auth.Mode(), s.Auth.SystemAccount, mode, systemAccount)
		}
		if len(s.MissingRoutes) != 0 || len(s.Routes) != 2 {
			t.Errorf("server %s routes %v, missing %v; want both others", s.Name, s.Routes, s.MissingRoutes)
		}
		if s.MetaLeader == "" || s.MetaLeader != snap.MetaLeader || !slices.Equal(s.MetaMembers, names) {
			t.Errorf("server %s meta leader %q members %v, want %q of %v", s.Name, s.MetaLeader, s.MetaMembers, snap.MetaLeader, names)
		}
		if !s.Healthy {
			t.Errorf("server %s not healthy: %s", s.Name, s.HealthError)
		}
	}
	kinds := map[GroupKind]int{}
	for _, g := range snap.Groups {
		kinds[g.Kind]++
		if g.Leader == "" || len(g.Members) != 3 {
			t.Errorf("%s: leader %q members %v", g.Label(), g.Leader, g.Members)
		}
	}
	if kinds[GroupMeta] != 1 || kinds[GroupStream] != streams || kinds[GroupConsumer] != 2*streams {
		t.Errorf("groups by kind %v, want 1 meta, %d streams, %d consumers", kinds, streams, 2*streams)
	}
	if snap.StreamCount() != streams {
		t.Errorf("streams %v, want %d", snap.Streams, streams)
	}
}

func TestObserveWithoutAuth(t *testing.T) {
	c := startCluster(t, "demo", demo, nil)
	o := New(Options{})
	defer o.Close()
	target := c.target(nil)
	addStreams(t, c.connect("demo-0", nil), 5, 3, jetstream.FileStorage, 2)

	t.Run("a settled cluster is Settled with each server's version and revision", func(t *testing.T) {
		snap := waitFor(t, o, target, 30*time.Second, "Settled", settled)
		logSnapshot(t, snap)
		checkSettledFacts(t, snap, demo, AuthNone, "$SYS", 5)
		if got := snap.Streams[0]; got.Account != "$G" || len(got.Streams) != 5 || got.Streams[0].Replicas != 3 || got.Streams[0].Messages != 3 {
			t.Errorf("streams of $G: %+v", got)
		}
	})

	t.Run("a replica that lags is seen catching up, then current", func(t *testing.T) {
		// Stop demo-2 unless it leads the meta group; then stop demo-1.
		name := "demo-2"
		if snap := o.Observe(context.Background(), target); snap.MetaLeader == name {
			name = "demo-1"
		}
		lagging := c.server(name)
		lagging.stop()
		other := "demo-0"
		if name == other || c.server(other).srv == nil {
			other = "demo-1"
		}
		nc := c.connect(other, nil)
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		payload := make([]byte, 1024)
		var acks []jetstream.PubAckFuture
		for i := range 10000 {
			// WithStallWait: with 4,000 acks outstanding (nats.go's
			// default) PublishAsync waits for one this long before it
			// gives up, 200ms by default: too short on a loaded machine
			// (seen in CI: "stalled with too many outstanding async
			// published messages"). The test is about the lag, not speed.
			f, err := js.PublishAsync(fmt.Sprintf("S%d.lag", i%5), payload, jetstream.WithStallWait(30*time.Second))
			if err != nil {
				t.Fatalf("publishing: %v", err)
			}
			acks = append(acks, f)
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			t.Fatal("publishing 10,000 messages did not complete")
		}
		for _, a := range acks {
			select {
			case err := <-a.Err():
				// A stream without a leader for a moment answers no one
				// ("no response from stream", seen in CI): the message is
				// published again, synchronously, with retries.
				m := a.Msg()
				if _, err2 := js.Publish(ctx, m.Subject, m.Data, jetstream.WithRetryAttempts(20), jetstream.WithRetryWait(250*time.Millisecond)); err2 != nil {
					t.Fatalf("publish not acknowledged: %v; published again: %v", err, err2)
				}
			default:
			}
		}
		lagging.start(t)
		seen := map[string]int{}
		var catching *Snapshot
		snap := waitFor(t, o, target, 60*time.Second, "AllGroupsCurrent after catch-up", func(s *Snapshot) bool {
			seen[s.Verdict.Reason]++
			if s.Verdict.Reason == clusterv1beta1.ReasonGroupsCatchingUp && catching == nil {
				catching = s
			}
			return s.Verdict.Settled()
		})
		t.Logf("restarted %s after 10,000 messages; verdicts seen while it caught up: %v", name, seen)
		if catching == nil {
			t.Errorf("GroupsCatchingUp never seen (saw %v)", seen)
		} else {
			t.Logf("catching up: %s", catching.Verdict.Message)
		}
		logSnapshot(t, snap)
		for _, st := range snap.Streams[0].Streams {
			if st.Messages != 3+2000 {
				t.Errorf("stream %s holds %d messages, want 2003", st.Name, st.Messages)
			}
		}
	})

	t.Run("an address that reaches another server is that server silent", func(t *testing.T) {
		swapped := target
		swapped.Servers = slices.Clone(target.Servers)
		swapped.Servers[2].MonitorPort = swapped.Servers[0].MonitorPort
		snap := o.Observe(context.Background(), swapped)
		if s, _ := snap.Server("demo-2"); s.Answered || snap.Verdict.Reason != clusterv1beta1.ReasonServersSilent {
			t.Errorf("demo-2 answered=%v err=%q, verdict %s", s.Answered, s.Err, snap.Verdict.Reason)
		} else {
			t.Logf("verdict: %s: %s", snap.Verdict.Reason, snap.Verdict.Message)
		}
	})

	t.Run("a server shut down is ServersSilent, named, within 3 s", func(t *testing.T) {
		c.server("demo-1").stop()
		snap := o.Observe(context.Background(), target)
		logSnapshot(t, snap)
		if snap.Verdict.Reason != clusterv1beta1.ReasonServersSilent || snap.Verdict.Status != "False" {
			t.Fatalf("verdict %s %s, want False ServersSilent", snap.Verdict.Status, snap.Verdict.Reason)
		}
		if s, _ := snap.Server("demo-1"); s.Answered || s.Err == "" {
			t.Errorf("demo-1 answered=%v err=%q", s.Answered, s.Err)
		}
		if !containsWord(snap.Verdict.Message, "demo-1") || containsWord(snap.Verdict.Message, "demo-0") {
			t.Errorf("message %q should name demo-1 only", snap.Verdict.Message)
		}
		if snap.Took > 3*time.Second {
			t.Errorf("observation took %s, want under 3s", snap.Took)
		}
	})

	t.Run("a server that accepts but never answers costs about the request timeout", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		done := make(chan struct{})
		go func() { // accept and hold connections, never answer
			defer close(done)
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				held = append(held, conn)
			}
		}()
		hung := target
		hung.Servers = append(slices.Clone(target.Servers), ServerAddr{Name: "demo-3", Host: "127.0.0.1", MonitorPort: l.Addr().(*net.TCPAddr).Port})
		snap := o.Observe(context.Background(), hung)
		l.Close()
		<-done
		logSnapshot(t, snap)
		if snap.Verdict.Reason != clusterv1beta1.ReasonServersSilent || !containsWord(snap.Verdict.Message, "demo-3") {
			t.Errorf("verdict %s: %s", snap.Verdict.Reason, snap.Verdict.Message)
		}
		if snap.Took < DefaultRequestTimeout || snap.Took > 3*time.Second {
			t.Errorf("observation took %s, want about %s", snap.Took, DefaultRequestTimeout)
		}
	})

	t.Run("an address that reaches another server is silent, with nothing of the other's", func(t *testing.T) {
		// Every endpoint is asked at once (ask): what the wrong server
		// answered besides /varz must not count for the expected one.
		// An earlier subtest may have left a server stopped: the address
		// of the first server that answers is given to the next one.
		snap := o.Observe(context.Background(), target)
		a := slices.IndexFunc(snap.Servers, func(s Server) bool { return s.Answered })
		if a < 0 {
			t.Fatalf("no server answers: %s", snap.Verdict.Message)
		}
		answering, b := snap.Servers[a].Name, (a+1)%len(snap.Servers)
		wrong := target
		wrong.Servers = slices.Clone(target.Servers)
		wrong.Servers[b].MonitorPort = wrong.Servers[a].MonitorPort
		snap = o.Observe(context.Background(), wrong)
		logSnapshot(t, snap)
		s := snap.Servers[b]
		if s.Answered || !strings.Contains(s.Err, fmt.Sprintf("answered as server %q", answering)) || s.ReportedName != answering {
			t.Errorf("%s: answered %v, reported name %q, err %q", s.Name, s.Answered, s.ReportedName, s.Err)
		}
		if s.JetStream || s.Healthy || len(s.Routes) > 0 || s.MetaLeader != "" || len(s.MetaMembers) > 0 {
			t.Errorf("%s kept what %s answered: %+v", s.Name, answering, s)
		}
		if snap.Verdict.Reason != clusterv1beta1.ReasonServersSilent || !containsWord(snap.Verdict.Message, s.Name) {
			t.Errorf("verdict %s: %s", snap.Verdict.Reason, snap.Verdict.Message)
		}
	})
}

func TestObserveInOperatorMode(t *testing.T) {
	tr := newTrust(t)
	names := []string{"demo-0", "demo-1", "demo-10"} // demo-1 is a prefix of demo-10
	c := startCluster(t, "demo", names, func(int) *trust { return tr })
	o := New(Options{})
	defer o.Close()
	target := c.target(tr.systemCreds)
	addStreams(t, c.connect("demo-0", tr.appCreds), 5, 3, jetstream.FileStorage, 2)

	t.Run("a settled cluster is Settled from the monitoring endpoints alone", func(t *testing.T) {
		noCreds := target
		noCreds.SystemCredentials = nil
		snap := waitFor(t, o, noCreds, 30*time.Second, "Settled", settled)
		logSnapshot(t, snap)
		checkSettledFacts(t, snap, names, AuthOperator, tr.systemPub, 5)
		for _, s := range snap.Servers {
			if s.Auth.Operator != tr.operatorPub || s.Auth.OperatorName != "test-operator" {
				t.Errorf("server %s trusts %q (%q)", s.Name, s.Auth.Operator, s.Auth.OperatorName)
			}
		}
		if got := snap.Streams[0]; got.Account != tr.appPub || got.AccountName != "APP" || len(got.Streams) != 5 {
			t.Errorf("streams: %+v", snap.Streams)
		}
	})

	sys, err := o.System(context.Background(), target)
	if err != nil {
		t.Fatalf("connecting to $SYS: %v", err)
	}

	t.Run("a STATSZ fan-out is answered by every server", func(t *testing.T) {
		start := time.Now()
		f, err := sys.Statsz(context.Background(), names...)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		var got []string
		for _, r := range f.Replies {
			got = append(got, r.Server.Name)
			t.Logf("STATSZ from %s id=%s version=%s revision=%s (%d bytes of statsz)", r.Server.Name, r.Server.ID, r.Server.Version, r.Server.ConfigRevision(), len(r.Data))
			if r.Server.ConfigRevision() != testRevision || r.Server.Version != server.VERSION || len(r.Data) == 0 {
				t.Errorf("reply from %s: %+v", r.Server.Name, r.Server)
			}
		}
		t.Logf("STATSZ fan-out answered by %v in %s, missing %v", got, took.Round(time.Millisecond), f.Missing)
		if !slices.Equal(got, names) || len(f.Missing) != 0 {
			t.Errorf("answered by %v, missing %v; want %v", got, f.Missing, names)
		}
	})

	t.Run("a fan-out for one name keeps that server only", func(t *testing.T) {
		f, err := sys.Ping(context.Background(), PingVarz, "demo-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Replies) != 1 || f.Replies[0].Server.Name != "demo-1" {
			t.Errorf("replies %+v", f.Replies)
		}
		id, err := sys.ServerID(context.Background(), "demo-1")
		if err != nil || id != c.server("demo-1").srv.ID() {
			t.Errorf("ServerID(demo-1) = %q, %v; want %q", id, err, c.server("demo-1").srv.ID())
		}
		if _, err := sys.ServerID(context.Background(), "demo-"); err == nil {
			t.Error("ServerID(demo-) found a server")
		}
	})

	t.Run("a reload of one server makes it report the new revision", func(t *testing.T) {
		s := c.server("demo-1")
		s.revision = "fedcba9876"
		s.writeConfig(t)
		if err := act.Reload(context.Background(), sys, "demo-1"); err != nil {
			t.Fatal(err)
		}
		snap := o.Observe(context.Background(), target)
		for _, srv := range snap.Servers {
			want := testRevision
			if srv.Name == "demo-1" {
				want = "fedcba9876"
			}
			if srv.ConfigRevision != want {
				t.Errorf("%s reports revision %q after reloading demo-1, want %q", srv.Name, srv.ConfigRevision, want)
			}
		}
		t.Logf("after RELOAD of demo-1: %s", revisions(snap))
		if err := act.Reload(context.Background(), sys, "demo-"); err == nil {
			t.Error("Reload(demo-) reached a server")
		}
	})

	t.Run("the meta leader steps down", func(t *testing.T) {
		snap := waitFor(t, o, target, 30*time.Second, "Settled", settled)
		old := snap.MetaLeader
		preferred := "demo-0"
		if old == preferred {
			preferred = "demo-10"
		}
		if err := act.StepDownMetaLeader(context.Background(), sys, preferred); err != nil {
			t.Fatal(err)
		}
		snap = waitFor(t, o, target, 30*time.Second, "a new meta leader", func(s *Snapshot) bool {
			return s.MetaLeader != "" && s.MetaLeader != old && s.Verdict.Settled()
		})
		t.Logf("meta leader %s stepped down; now %s", old, snap.MetaLeader)
	})

	t.Run("a server shut down for good is removed from the meta group", func(t *testing.T) {
		// Remove the server the $SYS connection is on (so the request
		// goes on a new connection: System never reconnects, it connects
		// again to the servers there are), unless it leads the meta group:
		// then another.
		snap := waitFor(t, o, target, 30*time.Second, "Settled", settled)
		gone := sys.nc.ConnectedServerName()
		if gone == snap.MetaLeader {
			gone = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == snap.MetaLeader })[0]
		}
		onGone := gone == sys.nc.ConnectedServerName()
		c.server(gone).stop()
		rest := target
		rest.Servers = slices.DeleteFunc(slices.Clone(target.Servers), func(a ServerAddr) bool { return a.Name == gone })
		if onGone {
			poll.Eventually(t, 10*time.Second, 50*time.Millisecond, "the connection to "+gone+" closed", func() error {
				if !sys.nc.IsClosed() {
					return fmt.Errorf("still %s", sys.nc.Status())
				}
				return nil
			})
		}
		sys, err := o.System(context.Background(), rest)
		if err != nil {
			t.Fatalf("connecting to $SYS after %s stopped: %v", gone, err)
		}
		start := time.Now()
		// A timeout does not say the removal failed (see RemovePeer): ask
		// again until it is done or the server is no longer a member.
		for attempt := 1; ; attempt++ {
			err := act.RemovePeer(context.Background(), sys, gone)
			if err == nil || errors.Is(err, act.ErrNotMember) {
				t.Logf("RemovePeer(%s) done after %d attempts in %s: %v", gone, attempt, time.Since(start).Round(time.Millisecond), err)
				break
			}
			if attempt == 5 {
				t.Fatalf("removing %s: %v", gone, err)
			}
			t.Logf("RemovePeer(%s) attempt %d: %v", gone, attempt, err)
		}
		snap = waitFor(t, o, rest, 30*time.Second, gone+" gone from the meta group", func(s *Snapshot) bool {
			for _, g := range s.Groups {
				if g.Kind == GroupMeta {
					return g.Leader != "" && !slices.ContainsFunc(g.Members, func(m Member) bool { return m.Name == gone })
				}
			}
			return false
		})
		t.Logf("%s removed from the meta group in %s", gone, time.Since(start).Round(time.Millisecond))
		logSnapshot(t, snap)
	})
}

func TestObserveSplitCluster(t *testing.T) {
	// The seed's split: demo-0 and demo-1 run without auth, demo-2 in
	// operator mode, all with the same routes.
	tr := newTrust(t)
	c := startCluster(t, "demo", demo, func(i int) *trust {
		if i == 2 {
			return tr
		}
		return nil
	})
	o := New(Options{})
	defer o.Close()
	target := c.target(tr.systemCreds)
	wants := []struct {
		name, mode string
		missing    []string
	}{
		{"demo-0", AuthNone, []string{"demo-2"}},
		{"demo-1", AuthNone, []string{"demo-2"}},
		{"demo-2", AuthOperator, []string{"demo-0", "demo-1"}},
	}
	// Routes take a moment to form (and to be refused): poll until the
	// no-auth pair is routed and demo-2 is cut off, then check that snapshot.
	snap := waitFor(t, o, target, 30*time.Second, "the split routes", func(s *Snapshot) bool {
		for _, want := range wants {
			if srv, _ := s.Server(want.name); !slices.Equal(srv.MissingRoutes, want.missing) {
				return false
			}
		}
		return true
	})
	logSnapshot(t, snap)
	if snap.Took > 3*time.Second {
		t.Errorf("observation took %s, want under 3s", snap.Took)
	}
	if snap.Verdict.Status != "False" {
		t.Errorf("verdict %s %s, want False", snap.Verdict.Status, snap.Verdict.Reason)
	}
	for _, want := range wants {
		s, _ := snap.Server(want.name)
		if !s.Answered || s.Auth.Mode() != want.mode || !slices.Equal(s.MissingRoutes, want.missing) {
			t.Errorf("%s: answered=%v auth=%s missing routes %v; want auth %s missing %v", s.Name, s.Answered, s.Auth.Mode(), s.MissingRoutes, want.mode, want.missing)
		}
	}
}

// revisions reads "demo-0=rev demo-1=rev ...".
func revisions(snap *Snapshot) string {
	var parts []string
	for _, s := range snap.Servers {
		parts = append(parts, s.Name+"="+s.ConfigRevision)
	}
	return strings.Join(parts, " ")
}

func containsWord(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if s[i:i+len(word)] == word {
			before := i == 0 || !isNameByte(s[i-1])
			after := i+len(word) == len(s) || !isNameByte(s[i+len(word)])
			if before && after {
				return true
			}
		}
	}
	return false
}

func isNameByte(b byte) bool {
	return b == '-' || b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
