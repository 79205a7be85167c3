// Command backup measures a backup and a restore of one large stream the
// way a NatsBackup's and a NatsRestore's Job do them: it runs a nats-server
// (the test bed's 2.15.2), fills a stream with -size bytes of incompressible
// messages, runs `nats-operator backup` and `nats-operator restore` (the
// controller's binary, as the Jobs run it) as child processes, and prints
// each one's wall time, throughput and peak resident memory (the kernel's
// maxrss of the child), and the snapshot's size. The controller itself
// takes no part: it makes the Job and reads its report, so its memory does
// not grow with the stream. Run by hack/bench-backup.sh, not in CI.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	size := flag.Int64("size", 1<<30, "bytes of message payload to fill the stream with")
	msgSize := flag.Int("msg-size", 64*1024, "bytes per message")
	natsServer := flag.String("nats-server", "", "the nats-server binary")
	operator := flag.String("nats-operator", "", "the nats-operator binary")
	flag.Parse()
	if err := run(*size, *msgSize, *natsServer, *operator); err != nil {
		fmt.Fprintln(os.Stderr, "bench-backup:", err)
		os.Exit(1)
	}
}

func run(size int64, msgSize int, natsServer, operator string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "nats-operator-bench-backup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	url, stop, err := startServer(natsServer, filepath.Join(dir, "server"), 4222+os.Getpid()%1000)
	if err != nil {
		return err
	}
	defer stop()
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BIG", Subjects: []string{"big.>"}}); err != nil {
		return err
	}
	payload := make([]byte, msgSize)
	start := time.Now()
	n := int(size / int64(msgSize))
	for i := 0; i < n; i += 256 {
		var acks []jetstream.PubAckFuture
		for j := i; j < min(i+256, n); j++ {
			_, _ = rand.Read(payload)
			f, err := js.PublishAsync("big.data", payload)
			if err != nil {
				return err
			}
			acks = append(acks, f)
		}
		for _, f := range acks {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return err
			}
		}
	}
	fmt.Fprintf(os.Stderr, "filled BIG with %d messages of %d bytes in %s\n", n, msgSize, time.Since(start).Round(time.Millisecond))
	fmt.Printf("stream: %d messages, %d MiB of payload\n", n, int64(n)*int64(msgSize)>>20)

	runDir := filepath.Join(dir, "backup", "run")
	if err := measure("backup", operator, size, "backup", "--servers="+url, "--dir="+runDir); err != nil {
		return err
	}
	var snap int64
	_ = filepath.Walk(runDir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			snap += fi.Size()
		}
		return nil
	})
	fmt.Printf("snapshot on disk: %d MiB\n", snap>>20)

	// The restore goes to a second server, as into a new cluster.
	url2, stop2, err := startServer(natsServer, filepath.Join(dir, "server2"), 5222+os.Getpid()%1000)
	if err != nil {
		return err
	}
	defer stop2()
	return measure("restore", operator, size, "restore", "--servers="+url2, "--dir="+runDir)
}

// measure runs the operator binary with args and prints its wall time,
// throughput and peak resident memory.
func measure(what, operator string, size int64, args ...string) error {
	cmd := exec.Command(operator, args...)
	cmd.Stderr = os.Stderr
	start := time.Now()
	out, err := cmd.Output()
	wall := time.Since(start)
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", what, err, out)
	}
	if !strings.Contains(string(out), "stream BIG ") {
		return fmt.Errorf("%s reported no stream BIG:\n%s", what, out)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	rss := int64(0)
	if ru != nil {
		rss = ru.Maxrss // KiB on Linux
	}
	fmt.Printf("%s: %s wall, %.0f MiB/s, peak RSS %d MiB (nats-operator %s)\n", what, wall.Round(time.Millisecond),
		float64(size>>20)/wall.Seconds(), rss>>10, what)
	return nil
}

// startServer runs nats-server with JetStream on a loopback port.
func startServer(bin, dir string, port int) (string, func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("listen: 127.0.0.1:%d\njetstream { store_dir: %q, max_file_store: 8GB }\n", port, filepath.Join(dir, "js"))), 0o644); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "-c", conf)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if nc, err := nats.Connect(url); err == nil {
			nc.Close()
			return url, func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }, nil
		}
	}
	_ = cmd.Process.Kill()
	return "", nil, fmt.Errorf("nats-server on %s did not start", url)
}
