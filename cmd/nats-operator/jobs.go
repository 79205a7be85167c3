package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-operator/nats-operator/pkg/backup"
)

// runJob runs the subcommand backup or restore, what the Jobs of a
// NatsBackup and a NatsRestore run (pkg/backup): it connects to the
// servers, does the work, writes the report to --report (the container's
// termination message, which the controller reads) and to standard
// output, and exits 0 when it succeeded, 1 when not.
func runJob(name string, args []string) int {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	servers := fs.String("servers", "", "NATS URLs of the cluster's servers, comma-separated.")
	creds := fs.String("creds", "", "Creds file of a user of the account; empty: connect without credentials (the global account of a cluster without auth).")
	dir := fs.String("dir", "", "The run's directory: the backup writes a directory per stream under it; the restore reads them.")
	streams := fs.String("streams", "", "Streams, comma-separated; empty: every stream (of the account for a backup, of the run for a restore).")
	report := fs.String("report", "", "File the report is written to (the container's terminationMessagePath); empty: standard output only.")
	noConsumers := fs.Bool("no-consumers", false, "backup: leave the consumers out of the snapshots.")
	overwrite := fs.Bool("overwrite", false, "restore: replace streams of the same name (each is deleted, then restored).")
	timeout := fs.Duration("timeout", 30*time.Second, "How long each JetStream API request and each chunk may take.")
	connectWithin := fs.Duration("connect-within", time.Minute, "How long to try the first connection: a new pod's NetworkPolicy rules (and its DNS name) may take seconds to arrive.")
	_ = fs.Parse(args)
	if *servers == "" || *dir == "" {
		fmt.Fprintf(os.Stderr, "nats-operator %s: --servers and --dir are required\n", name)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	var r backup.Report
	opts := []nats.Option{nats.Name("nats-operator " + name), nats.MaxReconnects(-1), nats.Timeout(5 * time.Second)}
	if *creds != "" {
		opts = append(opts, nats.UserCredentials(*creds))
	}
	nc, err := connect(ctx, *servers, opts, *connectWithin, time.Second)
	if err != nil {
		r = backup.Report{Reason: backup.ReasonFailed, Message: fmt.Sprintf("connecting to %s: %v", *servers, err)}
	} else {
		defer nc.Close()
		var list []string
		if *streams != "" {
			list = strings.Split(*streams, ",")
		}
		o := backup.Options{NoConsumers: *noConsumers, Overwrite: *overwrite, Timeout: *timeout}
		if name == "backup" {
			r = backup.RunBackup(ctx, nc, *dir, list, o)
		} else {
			r = backup.RunRestore(ctx, nc, *dir, list, o)
		}
	}
	out := r.Encode()
	fmt.Print(out)
	if *report != "" {
		if err := os.WriteFile(*report, []byte(out), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "writing the report: %v\n", err)
		}
	}
	if r.Reason != "" {
		return 1
	}
	return 0
}

// connect connects to servers, trying again every interval for up to
// within: a Job's pod is often up before the network lets it out (a
// NetworkPolicy enforcer adds a new pod's address to its rules a moment
// after the pod starts: kube-router took about a second on the real node,
// and the first backup Job, connecting at once, failed with "no servers
// available for connection"). Each failed try is logged.
func connect(ctx context.Context, servers string, opts []nats.Option, within, interval time.Duration) (*nats.Conn, error) {
	deadline := time.Now().Add(within)
	for try := 1; ; try++ {
		nc, err := nats.Connect(servers, opts...)
		if err == nil {
			return nc, nil
		}
		if time.Now().Add(interval).After(deadline) {
			return nil, fmt.Errorf("%w (%d tries in %s)", err, try, within)
		}
		fmt.Fprintf(os.Stderr, "connecting to %s (try %d): %v; trying again in %s\n", servers, try, err, interval)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(interval):
		}
	}
}
