package observe

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkObserve2000Streams observes one standalone JetStream server
// holding 2,000 streams with one consumer each.
func BenchmarkObserve2000Streams(b *testing.B) {
	c := startCluster(b, "bench", []string{"bench-0"}, nil)
	start := time.Now()
	addStreams(b, c.connect("bench-0", nil), 2000, 1, jetstream.MemoryStorage, 1)
	b.Logf("created 2,000 streams in %s", time.Since(start).Round(time.Millisecond))
	o := New(Options{})
	defer o.Close()
	target := c.target(nil)
	snap := waitFor(b, o, target, 60*time.Second, "Settled", settled)
	if snap.StreamCount() != 2000 || len(snap.Groups) != 2000+2000 {
		b.Fatalf("streams %d, groups %d", snap.StreamCount(), len(snap.Groups))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if s := o.Observe(context.Background(), target); !s.Verdict.Settled() {
			b.Fatal(s.Verdict)
		}
	}
}

// BenchmarkObserve3ServersUnderWrites observes a 3-server JetStream
// cluster with one R3 file stream while a publisher writes to it as fast
// as its acks come back: the observation a rollout's step waits on, whose
// latency is part of every step's gate-to-step time (issue 37).
func BenchmarkObserve3ServersUnderWrites(b *testing.B) {
	c := startCluster(b, "bench", []string{"bench-0", "bench-1", "bench-2"}, nil)
	nc := c.connect("bench-0", nil)
	addStreams(b, nc, 1, 3, jetstream.FileStorage, 1)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	published := make(chan int)
	go func() {
		n := 0
		defer func() { published <- n }()
		for ctx.Err() == nil {
			if _, err := js.Publish(ctx, "S0.load", []byte("0123456789abcdef")); err == nil {
				n++
			}
		}
	}()
	o := New(Options{})
	defer o.Close()
	target := c.target(nil)
	waitFor(b, o, target, 60*time.Second, "every server answering", func(s *Snapshot) bool {
		for _, srv := range s.Servers {
			if !srv.Answered {
				return false
			}
		}
		return true
	})
	b.ResetTimer()
	for b.Loop() {
		if s := o.Observe(context.Background(), target); len(s.Servers) != 3 {
			b.Fatal(s.Verdict)
		}
	}
	b.StopTimer()
	cancel()
	b.Logf("published %d messages while observing", <-published)
}
