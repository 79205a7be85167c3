package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/nats-operator/nats-operator/internal/testport"
)

// A Job's first connection is tried again until the server can be
// reached (here: a server that starts 1.5 s after the first try, as a
// NetworkPolicy that admits a new pod a moment after it starts), and
// given up on, naming the tries, when it never can.
func TestTheJobsFirstConnectionIsTriedAgain(t *testing.T) {
	port := testport.Free(t, "127.0.0.1")
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	ctx := context.Background()

	if _, err := connect(ctx, url, nil, 500*time.Millisecond, 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "tries in 500ms") {
		t.Fatalf("connect with nothing listening: %v, want an error naming the tries", err)
	}

	started := make(chan *server.Server, 1)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoSigs: true, NoLog: true})
		if err != nil {
			t.Error(err)
			started <- nil
			return
		}
		go s.Start()
		started <- s
	}()
	begin := time.Now()
	nc, err := connect(ctx, url, []nats.Option{nats.Timeout(time.Second)}, 20*time.Second, 200*time.Millisecond)
	if s := <-started; s != nil {
		defer s.Shutdown()
	}
	if err != nil {
		t.Fatalf("connect to a server that starts after 1.5 s: %v", err)
	}
	defer nc.Close()
	if took := time.Since(begin); took < 1500*time.Millisecond {
		t.Fatalf("connected after %s, before the server started", took)
	}
}
