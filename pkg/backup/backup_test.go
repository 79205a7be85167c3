package backup_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-operator/nats-operator/pkg/backup"
)

// startServer runs a JetStream server in process from a config.
func startServer(t *testing.T, conf string) *server.Server {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "nats.conf")
	conf = fmt.Sprintf("listen: 127.0.0.1:-1\njetstream { store_dir: %q }\n%s", filepath.Join(dir, "js"), conf)
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	o.NoSigs, o.NoLog = true, true
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(s.Shutdown)
	return s
}

func connect(t *testing.T, s *server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// A stream of the global account of a server without auth, with a durable
// consumer that acknowledged 400 of its 1,000 messages, is snapshotted
// into a directory and restored on a server with auth into the account of
// the user that restores it: the messages, sequences and the consumer's
// acknowledged state come back, the consumer resumes at message 401, and a
// second restore onto the stream now there is refused with
// ErrStreamExists, the stream untouched, unless Overwrite.
func TestSnapshotRestoresIntoAnotherAccountWithItsConsumer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	from := startServer(t, "")
	nc, js := connect(t, from)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if _, err := js.Publish(ctx, fmt.Sprintf("orders.%d", i), []byte(fmt.Sprintf("order %d", i+1))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "shipping", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	acked := 0
	for acked < 400 {
		batch, err := cons.Fetch(400-acked, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
			acked++
		}
	}

	dir := filepath.Join(t.TempDir(), "ORDERS")
	var progress int64
	res, err := backup.Snapshot(ctx, nc, "ORDERS", dir, backup.Options{ChunkSize: 4096, Progress: func(n int64) { progress = n }})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot: %+v, %d bytes reported in progress", res, progress)
	if res.State.Messages != 1000 || res.State.LastSeq != 1000 || res.State.ConsumerCount != 1 || res.DataBytes == 0 || progress != res.DataBytes {
		t.Fatalf("snapshot result %+v (progress %d)", res, progress)
	}
	meta, err := backup.ReadMetadata(dir)
	if err != nil {
		t.Fatal(err)
	}
	if name, _ := meta.StreamName(); name != "ORDERS" || meta.State.Messages != 1000 {
		t.Fatalf("backup.json names %q with %d messages", name, meta.State.Messages)
	}

	to := startServer(t, `accounts {
  APP { jetstream: enabled, users: [ {user: app, password: app} ] }
  OTHER { jetstream: enabled, users: [ {user: other, password: other} ] }
}`)
	appNC, appJS := connect(t, to, nats.UserInfo("app", "app"))
	restored, err := backup.Restore(ctx, appNC, dir, backup.Options{ChunkSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restored into APP: %+v", restored)
	if restored.State.Messages != 1000 || restored.State.LastSeq != 1000 || restored.DataBytes != res.DataBytes {
		t.Fatalf("restore result %+v", restored)
	}
	c, err := appJS.Consumer(ctx, "ORDERS", "shipping")
	if err != nil {
		t.Fatal(err)
	}
	if info := c.CachedInfo(); info.AckFloor.Stream != 400 || info.NumPending != 600 {
		t.Fatalf("the restored consumer has ack floor %d, %d pending; want 400 and 600", info.AckFloor.Stream, info.NumPending)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		md, _ := m.Metadata()
		if md.Sequence.Stream != 401 || string(m.Data()) != "order 401" {
			t.Fatalf("the restored consumer resumed at %d (%q), want 401", md.Sequence.Stream, m.Data())
		}
		t.Logf("the restored consumer resumes at stream sequence %d: %q", md.Sequence.Stream, m.Data())
	}
	_, otherJS := connect(t, to, nats.UserInfo("other", "other"))
	if _, err := otherJS.Stream(ctx, "ORDERS"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("ORDERS in account OTHER: %v, want not found", err)
	}

	// Over the stream now there: refused, the stream untouched.
	if _, err := appJS.Publish(ctx, "orders.new", []byte("after the restore")); err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Restore(ctx, appNC, dir, backup.Options{}); !errors.Is(err, backup.ErrStreamExists) {
		t.Fatalf("restoring over ORDERS: %v, want ErrStreamExists", err)
	} else {
		t.Logf("refused: %v", err)
	}
	if s, err := appJS.Stream(ctx, "ORDERS"); err != nil || s.CachedInfo().State.Msgs != 1001 {
		t.Fatalf("ORDERS after the refused restore: %v", err)
	}
	over, err := backup.Restore(ctx, appNC, dir, backup.Options{Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	if over.State.Messages != 1000 {
		t.Fatalf("restore with Overwrite: %+v", over)
	}
}

// A snapshot of a stream that does not exist fails and leaves no
// backup.json behind.
func TestSnapshotOfAMissingStreamLeavesNoBackup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, _ := connect(t, startServer(t, ""))
	dir := t.TempDir()
	if _, err := backup.Snapshot(ctx, nc, "NOPE", dir, backup.Options{}); err == nil {
		t.Fatal("a snapshot of a missing stream succeeded")
	} else {
		t.Logf("refused: %v", err)
	}
	if _, err := backup.ReadMetadata(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backup.json after a failed snapshot: %v", err)
	}
}

// ordersBackup starts a server, stores 100 messages in stream ORDERS and
// backs it up into a directory, for a stand-in of the restore API to take.
func ordersBackup(ctx context.Context, t *testing.T) (*nats.Conn, string, *backup.Result) {
	t.Helper()
	nc, js := connect(t, startServer(t, ""))
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := js.Publish(ctx, fmt.Sprintf("orders.%d", i), []byte("order")); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "ORDERS")
	res, err := backup.Snapshot(ctx, nc, "ORDERS", dir, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return nc, dir, res
}

// In a cluster the subject a restore's chunks go to can be answered to
// the client before the server's interest in it has reached the client's
// server (measured: "no responders" on the first chunk of a restore into a
// named account of a 3-server cluster). Here a stand-in for the restore
// API on a real server answers with its subject 300 ms before it
// subscribes to it: the restore sends the first chunk again until it is
// taken, and every chunk arrives once.
func TestRestoreWaitsForInterestInItsChunks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, dir, res := ordersBackup(ctx, t)

	const api = "FAKE.API"
	var got, chunks atomic.Int64
	late := make(chan struct{})
	answer := func(m *nats.Msg, body string) {
		if err := m.Respond([]byte(body)); err != nil {
			t.Error(err)
		}
	}
	sub, err := nc.Subscribe(api+".>", func(m *nats.Msg) {
		switch m.Subject {
		case api + ".STREAM.INFO.ORDERS":
			answer(m, `{"error":{"code":404,"err_code":10059,"description":"stream not found"}}`)
		case api + ".STREAM.RESTORE.ORDERS":
			answer(m, `{"deliver_subject":"FAKE.CHUNKS"}`)
			close(late)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	go func() {
		<-late
		time.Sleep(300 * time.Millisecond)
		chunkSub, err := nc.Subscribe("FAKE.CHUNKS", func(m *nats.Msg) {
			if len(m.Data) == 0 {
				answer(m, `{"state":{"messages":100,"last_seq":100}}`)
				return
			}
			got.Add(int64(len(m.Data)))
			chunks.Add(1)
			answer(m, "")
		})
		if err != nil {
			t.Error(err)
			return
		}
		t.Cleanup(func() { chunkSub.Unsubscribe() })
	}()

	start := time.Now()
	restored, err := backup.Restore(ctx, nc, dir, backup.Options{APIPrefix: api, ChunkSize: 1024, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("restore while the chunks' subject had no interest yet: %v", err)
	}
	t.Logf("restored %+v in %d chunks, %v after the restore began", restored.State, chunks.Load(), time.Since(start).Round(time.Millisecond))
	if got.Load() != res.DataBytes || restored.DataBytes != res.DataBytes || restored.State.Messages != 100 {
		t.Fatalf("the stand-in received %d bytes, the restore reports %d, the snapshot had %d", got.Load(), restored.DataBytes, res.DataBytes)
	}
}

// A restore whose stream's directory nats-server removed as the stream
// was made (seen in CI in a migration's restore, right after the servers
// restarted with the new account) is tried again: the stream the failed
// attempt left, which nats-server keeps in a cluster for an explicit
// delete, is deleted first, and the second attempt restores every byte.
// Another storage error is not tried again and nothing is deleted. Here a
// stand-in for the restore API on a real server answers the first
// attempt's end with the error as CI saw it.
func TestARestoreWhoseDirectoryWasRemovedUnderItIsTriedAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, dir, res := ordersBackup(ctx, t)

	for _, tc := range []struct {
		name, failure string
		wantErr       bool
	}{
		{"directory removed", "no such file or directory", false},
		{"disk full", "no space left on device", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := "FAKE" + strings.ReplaceAll(tc.name, " ", "")
			var mu sync.Mutex
			var log []string // what the stand-in was asked, in order
			exists, attempts := false, 0
			var got int64
			answer := func(m *nats.Msg, body string) {
				if err := m.Respond([]byte(body)); err != nil {
					t.Error(err)
				}
			}
			sub, err := nc.Subscribe(api+".>", func(m *nats.Msg) {
				mu.Lock()
				defer mu.Unlock()
				switch m.Subject {
				case api + ".STREAM.INFO.ORDERS":
					log = append(log, "info")
					if exists {
						answer(m, `{"config":{"name":"ORDERS"}}`)
					} else {
						answer(m, `{"error":{"code":404,"err_code":10059,"description":"stream not found"}}`)
					}
				case api + ".STREAM.DELETE.ORDERS":
					log = append(log, "delete")
					exists = false
					answer(m, `{"success":true}`)
				case api + ".STREAM.RESTORE.ORDERS":
					log = append(log, "restore")
					attempts++
					exists, got = true, 0
					answer(m, `{"deliver_subject":"`+api+`.CHUNKS"}`)
				case api + ".CHUNKS":
					if len(m.Data) > 0 {
						got += int64(len(m.Data))
						answer(m, "")
						return
					}
					if attempts == 1 {
						answer(m, `{"error":{"code":500,"err_code":10062,"description":"restore failed: error adding stream: could not create storage directory - mkdir /data/jetstream/jetstream/ACC/streams: `+tc.failure+` (10077)"}}`)
						return
					}
					answer(m, `{"state":{"messages":100,"last_seq":100}}`)
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()

			restored, err := backup.Restore(ctx, nc, dir, backup.Options{APIPrefix: api, ChunkSize: 1024, Timeout: 5 * time.Second})
			mu.Lock()
			defer mu.Unlock()
			t.Logf("asked %v; %v", log, err)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.failure) {
					t.Fatalf("restore after %q: %v, want that error", tc.failure, err)
				}
				if want := "info restore"; strings.Join(log, " ") != want {
					t.Fatalf("asked %v, want %s: nothing tried again or deleted", log, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("restore whose directory was removed under it once: %v", err)
			}
			if want := "info restore delete info restore"; strings.Join(log, " ") != want {
				t.Fatalf("asked %v, want %s", log, want)
			}
			if got != res.DataBytes || restored.DataBytes != res.DataBytes || restored.State.Messages != 100 {
				t.Fatalf("the second attempt sent %d bytes, the restore reports %d, the snapshot had %d", got, restored.DataBytes, res.DataBytes)
			}
		})
	}
}
