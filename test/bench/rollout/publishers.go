package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// connect connects a client with nats.go's defaults (and a name) to every
// server's pod address.
func connect(urls []string, name string) (*nats.Conn, jetstream.JetStream, error) {
	var (
		nc  *nats.Conn
		err error
	)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		nc, err = nats.Connect(strings.Join(urls, ","), nats.Name(name))
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("connecting %s to %v: %w", name, urls, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// gap is a time between two consecutive acks of the probe.
type gap struct{ from, to time.Time }

// pubError is one failed publish of the probe.
type pubError struct {
	at      time.Time
	timeout bool
	msg     string
}

// probe publishes to a stream one message at a time, each after the ack of
// the one before, and records the gaps between acks and the errors.
type probe struct {
	mu      sync.Mutex
	acks    int
	lastAck time.Time
	gaps    []gap // gaps of minGap or more
	errs    []pubError

	conn   *nats.Conn
	cancel context.CancelFunc
	done   chan struct{}
}

// minGap is the shortest gap the probe keeps: a longest gap of 0 means
// shorter than that.
const minGap = 5 * time.Millisecond

func startProbe(ctx context.Context, urls []string, subject string) (*probe, error) {
	conn, js, err := connect(urls, "bench-probe")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &probe{conn: conn, cancel: cancel, done: make(chan struct{}), lastAck: time.Now()}
	payload := make([]byte, 128)
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			// A context without a deadline: jetstream.Publish waits its
			// default 5 s for the ack.
			_, err := js.Publish(ctx, subject, payload)
			now := time.Now()
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			if err == nil {
				p.acks++
				if now.Sub(p.lastAck) >= minGap {
					p.gaps = append(p.gaps, gap{p.lastAck, now})
				}
				p.lastAck = now
			} else {
				p.errs = append(p.errs, pubError{at: now, timeout: errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout), msg: err.Error()})
			}
			p.mu.Unlock()
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
	}()
	return p, nil
}

func (p *probe) stop() {
	p.cancel()
	<-p.done
	p.conn.Close()
}

// waitAckAfter waits (at most timeout) until the probe got an ack after t.
func (p *probe) waitAckAfter(ctx context.Context, t time.Time, timeout time.Duration) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		p.mu.Lock()
		last := p.lastAck
		p.mu.Unlock()
		if last.After(t) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// probeWindow is what the probe saw between two moments.
type probeWindow struct {
	maxGap         gap
	errors         int
	timeouts       int
	firstErrorText string
}

// counter is a snapshot of the probe's ack count, to subtract.
func (p *probe) counter() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acks
}

// window returns the longest gap that ends after from and starts before to
// (whole: wait with waitAckAfter for it to end; a gap still open counts up
// to now) and the errors from from to the end of the gap in progress at to
// (a publish that timed out in it fails after to).
func (p *probe) window(from, to time.Time) probeWindow {
	p.mu.Lock()
	defer p.mu.Unlock()
	var w probeWindow
	errEnd := to
	for _, g := range p.gaps {
		if g.to.After(from) && g.from.Before(to) && g.to.Sub(g.from) > w.maxGap.to.Sub(w.maxGap.from) {
			w.maxGap = g
		}
		if g.from.Before(to) && g.to.After(errEnd) {
			errEnd = g.to
		}
	}
	if now := time.Now(); p.lastAck.Before(to) {
		errEnd = now
		if now.Sub(p.lastAck) > w.maxGap.to.Sub(w.maxGap.from) {
			w.maxGap = gap{p.lastAck, now}
		}
	}
	for _, e := range p.errs {
		if e.at.After(from) && !e.at.After(errEnd) {
			w.errors++
			if e.timeout {
				w.timeouts++
			}
			if w.firstErrorText == "" {
				w.firstErrorText = e.msg
			}
		}
	}
	return w
}

// load is --load-publishers asynchronous publishers, each at a fixed rate.
type load struct {
	published, errors, stalls atomic.Int64
	pending                   func() int64
	firstError                atomic.Pointer[string]

	conns  []*nats.Conn
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// loadCounts is a snapshot of the load's counters.
type loadCounts struct {
	published, errors, stalls, pending int64
	at                                 time.Time
}

func startLoad(ctx context.Context, urls []string, subject string, publishers, rate, size int) (*load, error) {
	ctx, cancel := context.WithCancel(ctx)
	l := &load{cancel: cancel}
	var streams []jetstream.JetStream
	for i := range publishers {
		conn, js, err := connect(urls, fmt.Sprintf("bench-load-%d", i))
		if err != nil {
			l.stop()
			return nil, err
		}
		l.conns = append(l.conns, conn)
		// nats.go's defaults but for the error handler, which counts.
		js, err = jetstream.New(conn, jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			l.errors.Add(1)
			msg := err.Error()
			l.firstError.CompareAndSwap(nil, &msg)
		}))
		if err != nil {
			l.stop()
			return nil, err
		}
		streams = append(streams, js)
	}
	l.pending = func() int64 {
		var n int64
		for _, js := range streams {
			n += int64(js.PublishAsyncPending())
		}
		return n
	}
	payload := make([]byte, size)
	const tick = 10 * time.Millisecond
	perTick := max(1, rate*int(tick)/int(time.Second))
	for i, js := range streams {
		subj := fmt.Sprintf("%s.%d", subject, i)
		l.wg.Go(func() {
			t := time.NewTicker(tick)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				for range perTick {
					_, err := js.PublishAsync(subj, payload)
					if err != nil {
						// The window of unacknowledged messages is full
						// (or the connection is closed): skip the rest
						// of this tick, as a producer under back pressure.
						l.stalls.Add(1)
						break
					}
					l.published.Add(1)
				}
			}
		})
	}
	return l, nil
}

func (l *load) counts() loadCounts {
	c := loadCounts{published: l.published.Load(), errors: l.errors.Load(), stalls: l.stalls.Load(), at: time.Now()}
	if l.pending != nil {
		c.pending = l.pending()
	}
	return c
}

func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
	for _, c := range l.conns {
		c.Close()
	}
}
