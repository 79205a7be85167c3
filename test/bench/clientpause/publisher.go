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

// variant is how a synchronous publisher is set up.
type variant struct {
	name string
	desc string
	// timeout is the per-publish context timeout; 0 leaves jetstream's
	// default (5 s, jetstream.New's DefaultTimeout).
	timeout time.Duration
	// msgID publishes every message with a Nats-Msg-Id
	// (jetstream.WithMsgID) and retries a message that failed with the same
	// id until it is acknowledged; without it a failed message is dropped
	// and the next one published.
	msgID bool
	// onLameDuck is what nats.LameDuckModeHandler does: "" nothing (the
	// handler only records when it ran), "reconnect" nc.ForceReconnect(),
	// "newconn" connects a second client and switches the publisher over,
	// closing the first after its last publish.
	onLameDuck string
}

var variants = []variant{
	{name: "defaults", desc: "nats.go defaults: jetstream Publish with its 5 s timeout, no Nats-Msg-Id, a failed message dropped"},
	{name: "ldm_reconnect", desc: "defaults + nats.LameDuckModeHandler calling nc.ForceReconnect()", onLameDuck: "reconnect"},
	{name: "ldm_newconn", desc: "defaults + nats.LameDuckModeHandler that connects a new client, switches to it and closes the old one after its last ack", onLameDuck: "newconn"},
	{name: "retry_msgid", desc: "per-publish timeout (--retry-timeout) + retry of the same message with its Nats-Msg-Id", msgID: true},
	{name: "ldm_reconnect_retry_msgid", desc: "ldm_reconnect + retry_msgid", msgID: true, onLameDuck: "reconnect"},
}

// gap is the time between two consecutive acks.
type gap struct{ from, to time.Time }

func (g gap) d() time.Duration { return g.to.Sub(g.from) }

// pubError is one failed publish.
type pubError struct {
	at  time.Time
	msg string
}

// conn is one client connection of a publisher.
type conn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// publisher publishes one message at a time to subject on the server it
// was connected to, each after the ack of the one before, and records the
// gaps between acks, the errors and what its connection went through.
type publisher struct {
	v       variant
	subject string
	cur     atomic.Pointer[conn]

	mu          sync.Mutex
	acked       int // distinct messages acknowledged
	duplicates  int // acks that said Duplicate (a retried message stored before)
	lastAck     time.Time
	gaps        []gap // gaps of minGap or more
	errs        []pubError
	lameDuckAt  time.Time // first LameDuckModeHandler call
	disconnects []time.Time
	reconnects  []time.Time
	switchedAt  time.Time // ldm_newconn: the second connection ready
	handlerErr  error

	stopping atomic.Bool
	done     chan struct{}
}

// minGap is the shortest gap kept.
const minGap = 5 * time.Millisecond

func (p *publisher) options(name string) []nats.Option {
	return []nats.Option{
		nats.Name(name),
		nats.LameDuckModeHandler(p.onLameDuck),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { p.note(&p.disconnects) }),
		nats.ReconnectHandler(func(*nats.Conn) { p.note(&p.reconnects) }),
	}
}

func (p *publisher) note(to *[]time.Time) {
	now := time.Now()
	p.mu.Lock()
	*to = append(*to, now)
	p.mu.Unlock()
}

func (p *publisher) onLameDuck(nc *nats.Conn) {
	now := time.Now()
	p.mu.Lock()
	first := p.lameDuckAt.IsZero()
	if first {
		p.lameDuckAt = now
	}
	p.mu.Unlock()
	if !first {
		return
	}
	switch p.v.onLameDuck {
	case "reconnect":
		if err := nc.ForceReconnect(); err != nil {
			p.mu.Lock()
			p.handlerErr = err
			p.mu.Unlock()
		}
	case "newconn":
		// The servers the lame duck INFO announced (it lists only the
		// others); a client of a Service would dial the Service again,
		// which no longer routes to the terminating pod.
		urls := nc.DiscoveredServers()
		if len(urls) == 0 {
			urls = nc.Servers()
		}
		nc2, err := nats.Connect(strings.Join(urls, ","), p.options(p.v.name+"-2")...)
		var js2 jetstream.JetStream
		if err == nil {
			js2, err = jetstream.New(nc2)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.handlerErr = err
			return
		}
		p.cur.Store(&conn{nc: nc2, js: js2})
		p.switchedAt = time.Now()
	}
}

// startPublisher connects the publisher to url (one server, as a client of
// a Service lands on one) and starts publishing.
func startPublisher(v variant, url, subject string, retryTimeout time.Duration) (*publisher, error) {
	p := &publisher{v: v, subject: subject, done: make(chan struct{})}
	nc, err := nats.Connect(url, p.options(v.name)...)
	if err != nil {
		return nil, fmt.Errorf("connecting the publisher to %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	p.cur.Store(&conn{nc: nc, js: js})
	timeout := v.timeout
	if v.msgID && timeout == 0 {
		timeout = retryTimeout
	}
	p.lastAck = time.Now()
	payload := make([]byte, 128)
	go func() {
		defer close(p.done)
		used := p.cur.Load()
		for seq := 0; !p.stopping.Load(); {
			c := p.cur.Load()
			if c != used {
				// ldm_newconn switched: no publish is in flight on the old
				// connection now (one at a time), so it goes.
				used.nc.Close()
				used = c
			}
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, timeout)
			}
			var opts []jetstream.PublishOpt
			if v.msgID {
				opts = append(opts, jetstream.WithMsgID(fmt.Sprintf("%s-%d", subject, seq)))
			}
			start := time.Now()
			ack, err := c.js.Publish(ctx, subject, payload, opts...)
			cancel()
			now := time.Now()
			p.mu.Lock()
			if err == nil {
				p.acked++
				if ack.Duplicate {
					p.duplicates++
				}
				if now.Sub(p.lastAck) >= minGap {
					p.gaps = append(p.gaps, gap{p.lastAck, now})
				}
				p.lastAck = now
			} else {
				p.errs = append(p.errs, pubError{at: now, msg: err.Error()})
			}
			p.mu.Unlock()
			if err == nil || !v.msgID {
				seq++
			}
			if err != nil && now.Sub(start) < 10*time.Millisecond {
				// An error at once (disconnected, no responders): do not
				// spin.
				time.Sleep(10 * time.Millisecond)
			}
		}
		used.nc.Close()
		if c := p.cur.Load(); c != used {
			c.nc.Close()
		}
	}()
	return p, nil
}

// stop lets the publish in flight finish, then stops.
func (p *publisher) stop() {
	p.stopping.Store(true)
	<-p.done
}

// ackedSince reports whether the publisher got an ack after t.
func (p *publisher) ackedSince(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastAck.After(t)
}

// count is the messages acknowledged so far.
func (p *publisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

// errorSummary groups the error texts: "2x context deadline exceeded".
func errorSummary(errs []pubError) string {
	var order []string
	n := map[string]int{}
	for _, e := range errs {
		if n[e.msg] == 0 {
			order = append(order, e.msg)
		}
		n[e.msg]++
	}
	var parts []string
	for _, m := range order {
		parts = append(parts, fmt.Sprintf("%dx %q", n[m], m))
	}
	return strings.Join(parts, ", ")
}

var errNoAck = errors.New("no ack after the server exited")
