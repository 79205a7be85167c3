package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	natsServer     string
	natsCLI        string
	variants       []variant
	tries          int
	retryTimeout   time.Duration
	warmup         time.Duration
	shortGrace     time.Duration
	shortVariants  []variant
	natsCLITries   int
	natsCLIMsgs    int
	natsCLISeconds float64
	keep           bool
}

func main() {
	var o options
	vs := flag.String("variants", variantNames(variants), "Publisher variants, comma separated.")
	flag.StringVar(&o.natsServer, "nats-server", "", "The nats-server binary (hack/testbin.sh nats 2.15.2).")
	flag.StringVar(&o.natsCLI, "nats", "", "natscli's nats binary; empty skips the natscli runs.")
	flag.IntVar(&o.tries, "tries", 3, "Lame duck restarts per variant.")
	flag.DurationVar(&o.retryTimeout, "retry-timeout", 500*time.Millisecond, "Per-publish timeout of the *_retry_msgid variants.")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "How long a publisher runs before the lame duck signal.")
	flag.DurationVar(&o.shortGrace, "short-grace", time.Second, "A second cluster with this spec.lameDuck.gracePeriod runs --short-grace-variants; 0 skips it.")
	sv := flag.String("short-grace-variants", "defaults", "Variants run with --short-grace.")
	flag.IntVar(&o.natsCLITries, "nats-tries", 3, "natscli runs.")
	flag.IntVar(&o.natsCLIMsgs, "nats-msgs", 0, "natscli --msgs; 0: --nats-seconds at the rate the first defaults try measured.")
	flag.Float64Var(&o.natsCLISeconds, "nats-seconds", 25, "How long a natscli run should last when --nats-msgs is 0.")
	flag.BoolVar(&o.keep, "keep", false, "Keep the servers' directories (configs, stores, logs).")
	flag.Parse()
	var err error
	if o.variants, err = pickVariants(*vs); err == nil {
		o.shortVariants, err = pickVariants(*sv)
	}
	if err == nil && o.natsServer == "" {
		err = errors.New("--nats-server is required")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-clientpause:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-clientpause:", err)
		os.Exit(1)
	}
}

func variantNames(vs []variant) string {
	var n []string
	for _, v := range vs {
		n = append(n, v.name)
	}
	return strings.Join(n, ",")
}

func pickVariants(list string) ([]variant, error) {
	var out []variant
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		i := slices.IndexFunc(variants, func(v variant) bool { return v.name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown variant %q (known: %s)", name, variantNames(variants))
		}
		out = append(out, variants[i])
	}
	return out, nil
}

// say prints progress to stderr; figures go to stdout (see figure).
func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// figure prints one figure: "name: value unit"; a duration in seconds
// rounded to the millisecond.
func figure(name string, value any, unit string) {
	switch v := value.(type) {
	case time.Duration:
		fmt.Printf("%s: %s %s\n", name, strconv.FormatFloat(math.Round(v.Seconds()*1000)/1000, 'f', -1, 64), unit)
	default:
		fmt.Printf("%s: %v %s\n", name, v, unit)
	}
}

func comment(format string, args ...any) { fmt.Printf("# "+format+"\n", args...) }

func nproc() string {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return strconv.Itoa(runtime.NumCPU())
	}
	return strings.TrimSpace(string(out))
}

func serverVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

func run(ctx context.Context, o options) error {
	root, _ := filepath.Abs(".")
	head, _ := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	fmt.Printf("# nats-operator client pause benchmark (hack/bench-clientpause.sh), commit %s, %s\n",
		strings.TrimSpace(string(head)), time.Now().UTC().Format(time.RFC3339))
	fmt.Printf("# go %s; %s cores; figures taken on a machine shared with other work\n", runtime.Version(), nproc())
	fmt.Printf("# %s; 3 servers rendered by pkg/render (lame duck 30s, grace period 10s, and %s for --short-grace), R3 file stream %s; %d tries per variant; retry timeout %s\n",
		serverVersion(o.natsServer), o.shortGrace, streamName, o.tries, o.retryTimeout)
	for _, v := range o.variants {
		comment("variant %s: %s", v.name, v.desc)
	}

	dir, err := os.MkdirTemp("", "bench-clientpause-")
	if err != nil {
		return err
	}
	failed := true
	defer func() {
		if failed || o.keep {
			say("servers' directories kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	}()

	b := &bench{o: o}
	if err := b.phase(ctx, filepath.Join(dir, "grace10s"), 0, "", o.variants, true); err != nil {
		return err
	}
	if o.shortGrace > 0 && len(o.shortVariants) > 0 {
		prefix := "grace" + shortDuration(o.shortGrace) + "_"
		if err := b.phase(ctx, filepath.Join(dir, "short"), o.shortGrace, prefix, o.shortVariants, false); err != nil {
			return err
		}
	}
	failed = false
	return nil
}

func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}

type bench struct {
	o options
	// rate is the acks a second of the first defaults try before its signal.
	rate float64
}

// phase runs a cluster (grace 0: production's) and, on it, every variant's
// tries and, when natscli is set, the natscli runs.
func (b *bench) phase(ctx context.Context, dir string, grace time.Duration, prefix string, vs []variant, withCLI bool) error {
	waitCI(ctx)
	say("starting 3 servers (%s)", dir)
	c, err := startCluster(ctx, b.o.natsServer, dir, grace)
	if err != nil {
		return err
	}
	defer c.stop()
	comment("--- %slame_duck_grace_period %s, termination grace period %s", prefix, c.grace, c.termination)
	for _, v := range vs {
		var maxGap time.Duration
		var errs int
		for k := 1; k <= b.o.tries; k++ {
			r, err := b.try(ctx, c, v, fmt.Sprintf("%s%s_try%d", prefix, v.name, k))
			if err != nil {
				return err
			}
			maxGap, errs = max(maxGap, r.maxGap), errs+r.errors
		}
		figure(prefix+v.name+"_max_gap_over_tries_seconds", maxGap, "s")
		figure(prefix+v.name+"_errors_over_tries", errs, "errors")
	}
	if withCLI && b.o.natsCLI != "" {
		completed := 0
		for k := 1; k <= b.o.natsCLITries; k++ {
			ok, err := b.natsCLITry(ctx, c, k)
			if err != nil {
				return err
			}
			if ok {
				completed++
			}
		}
		figure("natscli_completed", fmt.Sprintf("%d/%d", completed, b.o.natsCLITries), "runs")
	}
	return nil
}

// waitCI waits while /tmp/ci-running exists (the CI of this machine runs).
func waitCI(ctx context.Context) {
	for {
		if _, err := os.Stat("/tmp/ci-running"); err != nil {
			return
		}
		say("/tmp/ci-running exists: waiting")
		select {
		case <-ctx.Done():
			return
		case <-time.After(30 * time.Second):
		}
	}
}

// tryResult is what one try measured.
type tryResult struct {
	maxGap time.Duration
	errors int
}

// try runs one publisher of variant v on the stream leader's server,
// restarts that server as a pod's deletion would (the preStop lame duck
// signal, exit, start again on the same store) and reports the gaps.
func (b *bench) try(ctx context.Context, c *cluster, v variant, name string) (tryResult, error) {
	var r tryResult
	waitCI(ctx)
	target, err := c.waitCurrent(ctx)
	if err != nil {
		return r, err
	}
	subject := streamName + "." + name
	p, err := startPublisher(v, target.url(), subject, b.o.retryTimeout)
	if err != nil {
		return r, err
	}
	select {
	case <-ctx.Done():
		p.stop()
		return r, ctx.Err()
	case <-time.After(b.o.warmup):
	}
	rate := float64(p.count()) / b.o.warmup.Seconds()
	if v.name == "defaults" && b.rate == 0 {
		b.rate = rate
	}
	say("%s: %s (stream leader) goes lame duck, publisher at %.0f acks/s", name, target.name, rate)
	signalled := time.Now()
	if err := target.lameDuck(); err != nil {
		p.stop()
		return r, err
	}
	exitedByItself := target.waitExit(c.termination)
	exited := time.Now()
	events := target.lameDuckEvents(signalled)
	// The pod's restart on the same volume.
	if err := target.start(); err != nil {
		p.stop()
		return r, err
	}
	// Until an ack after the exit (the pause in progress at the exit
	// ended), then a second more.
	for deadline := time.Now().Add(30 * time.Second); !p.ackedSince(exited) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if !p.ackedSince(exited) {
		say("%s: %v", name, errNoAck)
	}
	time.Sleep(time.Second)
	p.stop()

	p.mu.Lock()
	gaps, errs, acked, dups := p.gaps, p.errs, p.acked, p.duplicates
	ldm, disc, reco, switched, herr := p.lameDuckAt, p.disconnects, p.reconnects, p.switchedAt, p.handlerErr
	p.mu.Unlock()
	var longest gap
	for _, g := range gaps {
		if g.d() > longest.d() {
			longest = g
		}
	}
	r.maxGap, r.errors = longest.d(), len(errs)
	after := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return fmt.Sprintf("+%.3fs", t.Sub(signalled).Seconds())
	}
	stored, err := c.stored(ctx, subject)
	if err != nil {
		return r, fmt.Errorf("counting %s: %w", subject, err)
	}

	var steps []string
	for _, e := range events {
		steps = append(steps, fmt.Sprintf("%s +%.3fs", e.name, e.at.Seconds()))
	}
	comment("%s: server %s: %s; exit %s%s", name, target.name, strings.Join(steps, ", "), after(exited), map[bool]string{true: "", false: " (killed at the termination grace period)"}[exitedByItself])
	var times []string
	for _, t := range disc {
		times = append(times, after(t))
	}
	var rtimes []string
	for _, t := range reco {
		rtimes = append(rtimes, after(t))
	}
	extra := ""
	if !switched.IsZero() {
		extra = ", switched to a new connection " + after(switched)
	}
	if herr != nil {
		extra += ", handler error: " + herr.Error()
	}
	comment("%s: client: lame duck INFO %s, disconnected %v, reconnected %v%s", name, after(ldm), times, rtimes, extra)
	var big []string
	for _, g := range gaps {
		if g.d() >= 100*time.Millisecond {
			big = append(big, fmt.Sprintf("%.3fs from %s", g.d().Seconds(), after(g.from)))
		}
	}
	if len(big) > 0 {
		comment("%s: gaps of 100ms or more: %s", name, strings.Join(big, ", "))
	}
	if len(errs) > 0 {
		comment("%s: errors: %s (first %s)", name, errorSummary(errs), after(errs[0].at))
	}
	figure(name+"_max_gap_seconds", r.maxGap, "s")
	figure(name+"_max_gap_start_after_signal_seconds", longest.from.Sub(signalled), "s")
	figure(name+"_errors", r.errors, "errors")
	figure(name+"_lame_duck_info_after_signal_seconds", durationOrNone(ldm, signalled), "s")
	figure(name+"_messages_acked", acked, "messages")
	// Stored but never acknowledged: what a retry without Nats-Msg-Id
	// would duplicate (the ack lost, not the message).
	figure(name+"_stored_not_acked", int64(stored)-int64(acked), "messages")
	if v.msgID {
		figure(name+"_retries_acked_as_duplicate", dups, "messages")
	}
	return r, nil
}

func durationOrNone(t, from time.Time) any {
	if t.IsZero() {
		return "none"
	}
	return t.Sub(from)
}
