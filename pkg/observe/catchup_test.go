package observe

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A member restarted behind its stream copies the stream from the leader
// without its Raft log: the leader reports the same Lag for it until the
// copy is done, while the member's own store (its /jsz last sequence)
// grows. Measured against nats-server (in process): "lag 1307" for 1.3 s
// while the member's store went from 0 to 57,966 of 60,000 messages, then
// current. The controller times its next look at a catch-up from
// StoreBehind when Lag does not move (pkg/controller catchUps); a
// nats-server whose leader reports the lag shrinking makes this test fail,
// and that timing can then go back to Lag alone.
func TestACatchUpShowsInTheMembersOwnStore(t *testing.T) {
	c := startCluster(t, "copy", []string{"copy-0", "copy-1", "copy-2"}, nil)
	addStreams(t, c.connect("copy-0", nil), 1, 3, jetstream.FileStorage, 0)
	o := New(Options{})
	defer o.Close()
	target := c.target(nil)
	snap := waitFor(t, o, target, 30*time.Second, "Settled", settled)
	stream := func(s *Snapshot) Group {
		i := slices.IndexFunc(s.Groups, func(g Group) bool { return g.Kind == GroupStream && g.Name == "S0" })
		if i < 0 {
			return Group{}
		}
		return s.Groups[i]
	}
	// A member that leads neither the stream nor the meta group.
	name := ""
	for _, s := range c.servers {
		if s.name != stream(snap).Leader && s.name != snap.MetaLeader {
			name = s.name
			break
		}
	}
	member := c.server(name)
	member.stop()
	other := "copy-0"
	if other == name {
		other = "copy-1"
	}
	js, err := jetstream.New(c.connect(other, nil))
	if err != nil {
		t.Fatal(err)
	}
	const msgs = 60000
	payload := make([]byte, 1024)
	for range msgs {
		if _, err := js.PublishAsync("S0.copy", payload, jetstream.WithStallWait(30*time.Second)); err != nil {
			t.Fatalf("publishing: %v", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		t.Fatalf("%d publishes not acknowledged after 60 s", js.PublishAsyncPending())
	}

	member.start(t)
	type sample struct {
		at      time.Duration
		m       Member
		settled bool
	}
	var samples []sample
	start := time.Now()
	for time.Since(start) < 60*time.Second {
		snap := o.Observe(context.Background(), target)
		g := stream(snap)
		if i := slices.IndexFunc(g.Members, func(m Member) bool { return m.Name == name }); i >= 0 && g.Leader != "" {
			samples = append(samples, sample{time.Since(start), g.Members[i], snap.Verdict.Settled()})
		}
		if snap.Verdict.Settled() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	copying := 0
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1].m, samples[i].m
		if !a.Current && !b.Current && a.StoreReported && b.StoreReported && b.Lag == a.Lag && b.StoreBehind < a.StoreBehind {
			copying++
			t.Logf("%s at %s: lag %d, store %d behind; at %s: lag %d, store %d behind",
				name, samples[i-1].at.Round(time.Millisecond), a.Lag, a.StoreBehind, samples[i].at.Round(time.Millisecond), b.Lag, b.StoreBehind)
		}
	}
	if len(samples) == 0 || !samples[len(samples)-1].settled || !samples[len(samples)-1].m.Current {
		t.Fatalf("%s not current within 60 s (%d looks)", name, len(samples))
	}
	if copying == 0 {
		for _, s := range samples {
			t.Logf("%s at %s: %+v", name, s.at.Round(time.Millisecond), s.m)
		}
		t.Errorf("no two looks saw %s's store advance while the leader reported the same lag for it", name)
	}
}
