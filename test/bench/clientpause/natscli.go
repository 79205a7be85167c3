package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// lockedBuffer is natscli's combined output, written by exec's copiers and
// read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// natsCLITry runs `nats bench js pub sync` (natscli's defaults: one client,
// 128 B messages, its 5 s timeout) against the stream leader's server on the
// stream BENCH, puts that server in lame duck mode 2 s in, restarts it after
// its exit, and reports whether natscli completed.
func (b *bench) natsCLITry(ctx context.Context, c *cluster, k int) (bool, error) {
	waitCI(ctx)
	target, err := c.waitCurrent(ctx)
	if err != nil {
		return false, err
	}
	msgs := b.o.natsCLIMsgs
	if msgs == 0 {
		msgs = max(1000, int(b.rate*b.o.natsCLISeconds))
	}
	name := fmt.Sprintf("natscli_try%d", k)
	subject := streamName + "." + name
	args := []string{"--no-context", "--server", target.url(), "bench", "js", "pub", "sync", subject,
		"--stream", streamName, "--msgs", strconv.Itoa(msgs), "--no-progress"}
	cmd := exec.CommandContext(ctx, b.o.natsCLI, args...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	say("%s: nats %s (%s is the stream leader)", name, strings.Join(args, " "), target.name)

	// The lame duck signal once the benchmark has been publishing 2 s (its
	// own start: connect, stream lookup).
	var signalled time.Time
	var runErr error
	ended := false
	select {
	case runErr = <-done:
		ended = true
	case <-time.After(2 * time.Second):
	}
	if !ended {
		signalled = time.Now()
		if err := target.lameDuck(); err != nil {
			return false, err
		}
		target.waitExit(c.termination)
		if err := target.start(); err != nil {
			return false, err
		}
		select {
		case runErr = <-done:
		case <-time.After(120 * time.Second):
			_ = cmd.Process.Kill()
			runErr = <-done
		}
	}
	end := time.Now()
	ok := runErr == nil
	if signalled.IsZero() {
		comment("%s: natscli ended before the lame duck signal (%.3fs): raise --nats-msgs", name, end.Sub(started).Seconds())
	} else {
		comment("%s: --msgs %d; ended %.3fs after the lame duck signal, %.3fs after its start; exit: %v", name, msgs, end.Sub(signalled).Seconds(), end.Sub(started).Seconds(), exitText(runErr))
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			comment("%s: | %s", name, line)
		}
	}
	figure(name+"_completed", map[bool]int{true: 1, false: 0}[ok], "bool")
	if !signalled.IsZero() {
		figure(name+"_ended_after_signal_seconds", end.Sub(signalled), "s")
	}
	return ok, nil
}

func exitText(err error) string {
	if err == nil {
		return "0"
	}
	return err.Error()
}
