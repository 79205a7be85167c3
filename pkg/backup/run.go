package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
)

// Reasons a Report gives for a run that failed.
const (
	// ReasonStreamExists: a stream to restore exists and overwrite was
	// not asked; nothing was restored.
	ReasonStreamExists = "StreamExists"
	// ReasonStreamNotFound: a stream asked for is not in the account (a
	// backup) or not in the backup (a restore); nothing was written.
	ReasonStreamNotFound = "StreamNotFound"
	// ReasonFailed: the JetStream API, the connection or the volume
	// failed; the message says which, with the streams done before.
	ReasonFailed = "Failed"
)

// RunBackup snapshots streams (every stream of the account when empty)
// into a directory each under dir, in order, and reports what it wrote.
func RunBackup(ctx context.Context, nc *nats.Conn, dir string, streams []string, o Options) Report {
	all, err := StreamNames(ctx, nc, o)
	if err != nil {
		return Report{Reason: ReasonFailed, Message: "listing the streams: " + err.Error()}
	}
	slices.Sort(all)
	if len(streams) == 0 {
		streams = all
	}
	var missing []string
	for _, s := range streams {
		if !slices.Contains(all, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return Report{Reason: ReasonStreamNotFound, Message: fmt.Sprintf("no stream %s in the account (it has %s); nothing was written",
			strings.Join(missing, ", "), orNone(all))}
	}
	var r Report
	for _, s := range streams {
		res, err := Snapshot(ctx, nc, s, filepath.Join(dir, s), o)
		if err != nil {
			r.Reason, r.Message = ReasonFailed, fmt.Sprintf("%v (%d of %d streams written before)", err, len(r.Streams), len(streams))
			return r
		}
		r.Streams = append(r.Streams, streamReport(res))
	}
	return r
}

// RunRestore restores the streams of the backup run in dir (every stream
// it holds when streams is empty). Before restoring anything it checks
// that each is in the backup and, unless o.Overwrite, not in the account.
func RunRestore(ctx context.Context, nc *nats.Conn, dir string, streams []string, o Options) Report {
	held, err := BackupStreams(dir)
	if err != nil {
		return Report{Reason: ReasonFailed, Message: err.Error()}
	}
	if len(streams) == 0 {
		streams = held
	}
	var missing, exist []string
	for _, s := range streams {
		if !slices.Contains(held, s) {
			missing = append(missing, s)
			continue
		}
		there, err := streamExists(ctx, nc, s, o)
		if err != nil {
			return Report{Reason: ReasonFailed, Message: fmt.Sprintf("looking up stream %s: %v", s, err)}
		}
		if there {
			exist = append(exist, s)
		}
	}
	switch {
	case len(missing) > 0:
		return Report{Reason: ReasonStreamNotFound, Message: fmt.Sprintf("the backup holds no stream %s (it holds %s); nothing was restored",
			strings.Join(missing, ", "), orNone(held))}
	case len(exist) > 0 && !o.Overwrite:
		what := "stream " + exist[0] + " exists"
		if len(exist) > 1 {
			what = "streams " + strings.Join(exist, ", ") + " exist"
		}
		return Report{Reason: ReasonStreamExists, Message: what + " in the account; nothing was restored (set overwrite to replace them)"}
	}
	var r Report
	for _, s := range streams {
		res, err := Restore(ctx, nc, filepath.Join(dir, s), o)
		if err != nil {
			r.Reason, r.Message = ReasonFailed, fmt.Sprintf("%v (%d of %d streams restored before)", err, len(r.Streams), len(streams))
			return r
		}
		r.Streams = append(r.Streams, streamReport(res))
	}
	return r
}

// BackupStreams lists the streams of a backup run: its directories with
// a backup.json, sorted.
func BackupStreams(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the backup %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), MetadataFile)); err == nil {
			out = append(out, e.Name())
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

func streamReport(res *Result) StreamReport {
	return StreamReport{Name: res.Stream, Messages: res.State.Messages, Bytes: res.State.Bytes, FirstSeq: res.State.FirstSeq,
		LastSeq: res.State.LastSeq, Consumers: res.State.ConsumerCount, DataBytes: res.DataBytes}
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
