package framework

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CredsFile writes the creds file held in a Secret's user.creds to a file
// and returns its path.
func (s *Stack) CredsFile(ctx context.Context, t testing.TB, namespace, secret string) string {
	t.Helper()
	sec, err := s.Kube.CoreV1().Secrets(namespace).Get(ctx, secret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), secret+".creds")
	if err := os.WriteFile(p, sec.Data["user.creds"], 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// SecretStrings returns the lines of a creds file that are secret: the
// user JWT and the seed.
func SecretStrings(creds []byte) []string {
	var out []string
	for _, l := range strings.Split(string(creds), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "eyJ") || strings.HasPrefix(l, "SU") {
			out = append(out, l)
		}
	}
	return out
}

// AcceptProber measures when the cluster accepts clients: every interval it
// tries each address, without credentials and with a creds file, and
// records whether any server accepted a connection.
type AcceptProber struct {
	mu      sync.Mutex
	samples []AcceptSample
	cancel  context.CancelFunc
	done    chan struct{}
}

// AcceptSample is one probe round.
type AcceptSample struct {
	At       time.Time
	Accepted bool
}

// StartAcceptProber probes urls every interval.
func StartAcceptProber(ctx context.Context, urls []string, creds string, interval time.Duration) *AcceptProber {
	ctx, cancel := context.WithCancel(ctx)
	p := &AcceptProber{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			ok := false
			for _, u := range urls {
				for _, opts := range [][]nats.Option{nil, {nats.UserCredentials(creds)}} {
					opts = append(opts, nats.Timeout(500*time.Millisecond), nats.NoReconnect())
					if nc, err := nats.Connect(u, opts...); err == nil {
						nc.Close()
						ok = true
						break
					}
				}
				if ok {
					break
				}
			}
			p.mu.Lock()
			p.samples = append(p.samples, AcceptSample{At: time.Now(), Accepted: ok})
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(interval):
			}
		}
	}()
	return p
}

// Stop stops probing and returns the longest time no server accepted a
// client (from the first failed probe to the next accepted one).
func (p *AcceptProber) Stop() (longest time.Duration, failed int) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	var start time.Time
	for _, s := range p.samples {
		switch {
		case !s.Accepted:
			failed++
			if start.IsZero() {
				start = s.At
			}
		case !start.IsZero():
			if d := s.At.Sub(start); d > longest {
				longest = d
			}
			start = time.Time{}
		}
	}
	return longest, failed
}
