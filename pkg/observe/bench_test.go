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
