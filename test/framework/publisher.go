package framework

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/poll"
)

// PodURLs returns nats://<podIP>:4222 of the cluster's pods.
func (s *Stack) PodURLs(ctx context.Context, t testing.TB, namespace, cluster string) []string {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "cluster.nats-operator.io/cluster=" + cluster})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" {
			urls = append(urls, "nats://"+p.Status.PodIP+":4222")
		}
	}
	if len(urls) == 0 {
		t.Fatal("no pod addresses")
	}
	return urls
}

// Connect connects a client that reconnects forever across urls.
func Connect(t testing.TB, urls []string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{
		nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond),
		nats.Timeout(2 * time.Second), nats.Name("e2e"),
	}, opts...)
	var nc *nats.Conn
	poll.Eventually(t, 30*time.Second, 200*time.Millisecond, fmt.Sprintf("a connection to %v", urls), func() error {
		var err error
		nc, err = nats.Connect(joinURLs(urls), opts...)
		return err
	})
	t.Cleanup(nc.Close)
	return nc
}

func joinURLs(urls []string) string {
	s := ""
	for i, u := range urls {
		if i > 0 {
			s += ","
		}
		s += u
	}
	return s
}

// CreateStream creates an R3 file stream on subject <name>.> and retries
// while JetStream is not ready.
func CreateStream(ctx context.Context, t testing.TB, js jetstream.JetStream, name string, replicas int) {
	t.Helper()
	poll.Eventually(t, time.Minute, 200*time.Millisecond, "stream "+name+" to be created", func() error {
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: name, Subjects: []string{name + ".>"}, Replicas: replicas, Storage: jetstream.FileStorage,
			Duplicates: 10 * time.Minute,
		})
		return err
	})
}

// Publisher publishes to a stream without pause, each message with a unique
// Nats-Msg-Id, retrying a message until JetStream acknowledges it, and
// counts acknowledgements.
type Publisher struct {
	js      jetstream.JetStream
	subject string

	mu       sync.Mutex
	acked    map[string]bool
	attempts int
	failures int
	lastErr  error

	cancel context.CancelFunc
	done   chan struct{}
}

// StartPublisher starts publishing to subject.
func StartPublisher(ctx context.Context, js jetstream.JetStream, subject string) *Publisher {
	ctx, cancel := context.WithCancel(ctx)
	p := &Publisher{js: js, subject: subject, acked: map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	go p.run(ctx)
	return p
}

func (p *Publisher) run(ctx context.Context) {
	defer close(p.done)
	for i := 0; ctx.Err() == nil; {
		id := strconv.Itoa(i)
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := p.js.Publish(pctx, p.subject, []byte("message "+id), jetstream.WithMsgID(id))
		cancel()
		p.mu.Lock()
		p.attempts++
		if err == nil {
			p.acked[id] = true
			i++
		} else {
			p.failures++
			p.lastErr = err
		}
		p.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Stop stops publishing and returns the acknowledged message ids.
func (p *Publisher) Stop() map[string]bool {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// Stats returns the acknowledged count, attempts and failed attempts.
func (p *Publisher) Stats() (acked, attempts, failures int, lastErr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked), p.attempts, p.failures, p.lastErr
}

// StreamReader reads every message of a stream and collects their
// Nats-Msg-Id headers. A Read that fails keeps what it read: the next Read,
// on any connection, goes on after the last sequence read instead of
// starting over, so a stream of hundreds of thousands of messages is read to
// the end however often a read fails.
//
// It reads with one ordered consumer and Consume, not a Fetch loop: an
// ordered consumer's Fetch deletes and re-creates its R1 consumer on every
// call, and the first pull on a just-created consumer placed on another
// server can be answered "no responders" (issue 16: the create response
// crosses the system account's dedicated route while the consumer's
// MSG.NEXT interest crosses the account's pooled route, and may come
// second). Consume creates the consumer once and, on that answer, re-creates
// it at once at the next sequence; Messages would stall 10s instead.
type StreamReader struct {
	Stream string
	// IDs holds the Nats-Msg-Id of every message read.
	IDs map[string]bool
	// Total is the stream's message count at the last Read.
	Total uint64
	// ConsumerErrors counts the errors the ordered consumer recovered from
	// by itself (no responders on a just-created consumer, missed
	// heartbeats): informational, a Read does not fail for them.
	ConsumerErrors int
	next           uint64 // the first sequence not yet read
}

// readIdle is how long a Read waits for the next message before giving up.
const readIdle = 10 * time.Second

// Read reads from where the last Read stopped to the stream's last
// sequence as it is now.
func (r *StreamReader) Read(ctx context.Context, js jetstream.JetStream) error {
	if r.IDs == nil {
		r.IDs, r.next = map[string]bool{}, 1
	}
	s, err := js.Stream(ctx, r.Stream)
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	r.Total = info.State.Msgs
	last := info.State.LastSeq
	if r.next > last || r.Total == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: r.next,
	})
	if err != nil {
		return err
	}
	var (
		mu       sync.Mutex
		readErr  error
		lastErr  error
		progress = time.Now()
		done     = make(chan struct{})
		finished bool
	)
	finish := func(err error) { // mu held
		if !finished {
			finished, readErr = true, err
			close(done)
		}
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if finished {
			return
		}
		md, err := m.Metadata()
		if err != nil {
			finish(err)
			return
		}
		r.IDs[m.Headers().Get(nats.MsgIdHdr)] = true
		r.next, progress = md.Sequence.Stream+1, time.Now()
		if r.next > last {
			finish(nil)
		}
	}, jetstream.PullMaxMessages(1000), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		mu.Lock()
		r.ConsumerErrors++
		lastErr = err
		mu.Unlock()
	}))
	if err != nil {
		return err
	}
	defer cc.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			mu.Lock()
			defer mu.Unlock()
			if readErr != nil {
				return fmt.Errorf("after sequence %d of %d: %w", r.next-1, last, readErr)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			mu.Lock()
			idle, lerr := time.Since(progress), lastErr
			if idle > readIdle {
				finish(fmt.Errorf("nothing for %v (last consumer error: %v)", readIdle, lerr))
			}
			mu.Unlock()
		}
	}
}
