package localnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/test/localnode/internal/podns"
)

// container runs one container of a pod as a local process. Its fields
// below spec are guarded by w.mu.
type container struct {
	w    *podWorker
	spec *corev1.Container
	init bool

	cmd          *exec.Cmd
	state        corev1.ContainerState
	lastState    corev1.ContainerState
	restartCount int32
	ready        bool
	started      bool
	everStarted  bool
	done         bool // exited for good (restart policy)
	imageID      string
	containerID  string
}

// minGraceAfterHook is the least time SIGTERM gets after the preStop hook,
// as in the kubelet.
const minGraceAfterHook = 2 * time.Second

// runMain runs a container until the pod terminates or the node stops,
// restarting it by the pod's restart policy with backoff.
func (c *container) runMain(ctx context.Context) {
	var failures int
	for {
		code, ran, err := c.runOnce(ctx)
		if ctx.Err() != nil || c.isTerminating() {
			return
		}
		policy := c.w.pod.Spec.RestartPolicy
		if err == nil && (policy == corev1.RestartPolicyNever || (policy == corev1.RestartPolicyOnFailure && code == 0)) {
			c.w.mu.Lock()
			c.done = true
			c.w.mu.Unlock()
			c.w.markDirty()
			<-c.waitTerminating(ctx)
			return
		}
		if ran >= c.w.n.opts.BackoffReset {
			failures = 0
		}
		delay := backoff(failures, c.w.n.opts.BackoffBase, c.w.n.opts.BackoffMax)
		failures++
		if delay > 0 {
			c.w.mu.Lock()
			if c.state.Waiting == nil || err == nil {
				// As the kubelet: while backing off, the exit that caused it
				// is the last termination state.
				if c.state.Terminated != nil {
					c.lastState = corev1.ContainerState{Terminated: c.state.Terminated}
				}
				c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
					Reason:  "CrashLoopBackOff",
					Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.spec.Name, c.w.name, c.w.ns, c.w.uid),
				}}
			}
			c.w.mu.Unlock()
			c.w.markDirty()
		}
		select {
		case <-ctx.Done():
			return
		case <-c.w.terminating:
			return
		case <-time.After(delay):
		}
	}
}

// runInit runs an init container to success, retrying by the restart
// policy; it returns false if the pod cannot go on.
func (c *container) runInit(ctx context.Context) bool {
	var failures int
	for {
		code, _, err := c.runOnce(ctx)
		if ctx.Err() != nil || c.isTerminating() {
			return false
		}
		if err == nil && code == 0 {
			c.w.mu.Lock()
			c.done = true
			c.w.mu.Unlock()
			return true
		}
		if c.w.pod.Spec.RestartPolicy == corev1.RestartPolicyNever && err == nil {
			c.w.mu.Lock()
			c.done = true
			c.w.mu.Unlock()
			c.w.markDirty()
			return false
		}
		delay := backoff(failures, c.w.n.opts.BackoffBase, c.w.n.opts.BackoffMax)
		failures++
		select {
		case <-ctx.Done():
			return false
		case <-c.w.terminating:
			return false
		case <-time.After(delay):
		}
	}
}

// backoff returns the delay before restart number failures+1: none for the
// first, then base doubling up to max.
func backoff(failures int, base, max time.Duration) time.Duration {
	if failures == 0 {
		return 0
	}
	d := base
	for i := 1; i < failures && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}

func (c *container) isTerminating() bool {
	select {
	case <-c.w.terminating:
		return true
	default:
		return false
	}
}

func (c *container) waitTerminating(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-c.w.terminating:
		}
		close(ch)
	}()
	return ch
}

func (c *container) setWaiting(reason, msg string) {
	c.w.mu.Lock()
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	c.w.mu.Unlock()
	c.w.markDirty()
}

// command returns the binary (empty unless the image runs nats-server or
// the exporter), the image ID and the rewritten command line.
func (c *container) command(pod *corev1.Pod, vals map[string]string) (string, []string, error) {
	var argv []string
	for _, a := range c.spec.Command {
		argv = append(argv, expand(a, vals))
	}
	var args []string
	for _, a := range c.spec.Args {
		args = append(args, expand(a, vals))
	}
	binary, digest := "", ""
	switch {
	case isNATSImage(c.spec.Image):
		version, err := imageVersion(c.spec.Image)
		if err != nil {
			return "", nil, err
		}
		if binary, digest, err = c.w.n.binaries.get(version); err != nil {
			return "", nil, err
		}
		if len(argv) == 0 {
			argv = []string{"nats-server"}
		}
	case isExporterImage(c.spec.Image):
		var err error
		if binary, digest, err = c.w.n.exporter.get(""); err != nil {
			return "", nil, err
		}
		// The image's entrypoint, and its CMD without args, as a container
		// runtime runs a container without a command.
		if len(c.spec.Command) == 0 {
			argv = append([]string(nil), exporterEntrypoint...)
			if len(c.spec.Args) == 0 {
				args = append([]string(nil), exporterCmd...)
			}
		}
	case c.w.n.isMapped(c.spec.Image):
		var err error
		if binary, digest, err = c.w.n.mapped.get(imageRepository(c.spec.Image)); err != nil {
			return "", nil, err
		}
		// The image's entrypoint is the binary.
		if len(c.spec.Command) == 0 {
			argv = []string{binary}
		}
	case c.w.n.archives.has(c.spec.Image):
		repo := imageRepository(c.spec.Image)
		im, err := c.w.n.archives.get(repo)
		if err != nil {
			return "", nil, err
		}
		if want := referenceDigest(c.spec.Image); want != "" && want != im.digest {
			return "", nil, fmt.Errorf("the archive of %s holds the image %s, not %s", repo, im.digest, want)
		}
		full, err := im.argv(argv, args)
		if err != nil {
			return "", nil, err
		}
		binary, digest = full[0], im.digest
		argv, args = []string{full[0]}, full[1:]
	}
	c.w.mu.Lock()
	if binary != "" {
		// As a runtime reports the image it ran: the repository and the
		// digest of what runs.
		c.imageID = imageRepository(c.spec.Image) + "@" + digest
	} else {
		c.imageID = "localnode://" + c.spec.Image
	}
	c.w.mu.Unlock()
	argv = append(argv, args...)
	if len(argv) == 0 {
		return "", nil, fmt.Errorf("image %q: localnode runs nats and prometheus-nats-exporter images, or commands found on the host", c.spec.Image)
	}
	argv = c.w.rewriter(pod, c.spec, binary).Command(argv)
	if binary != "" && argv[0] == binary && isExporterImage(c.spec.Image) {
		argv = exporterListens(argv, c.w.ip)
	}
	if binary == "" || argv[0] != binary {
		p, err := exec.LookPath(argv[0])
		if err != nil {
			return "", nil, fmt.Errorf("image %q: %w", c.spec.Image, err)
		}
		argv[0] = p
	}
	return binary, argv, nil
}

func (c *container) logPath() string {
	return c.w.n.ContainerLogPath(c.w.ns, c.w.name, c.spec.Name)
}

// Limits of the termination message taken from the log, as the kubelet's
// FallbackToLogsOnError: the last 80 lines, at most 2048 bytes.
const (
	terminationMessageLines = 80
	terminationMessageBytes = 2048
)

// logTail is the end of the container's log without the node's own lines,
// the kubelet's termination message under FallbackToLogsOnError.
func (c *container) logTail() string {
	b, err := os.ReadFile(c.logPath())
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.HasPrefix(l, "localnode: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) > terminationMessageLines {
		lines = lines[len(lines)-terminationMessageLines:]
	}
	msg := strings.Join(lines, "\n")
	if len(msg) > terminationMessageBytes {
		msg = msg[len(msg)-terminationMessageBytes:]
	}
	return msg
}

// logLine appends a line of the node's own to the container log.
func (c *container) logLine(format string, args ...any) {
	f, err := os.OpenFile(c.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "localnode: %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// runOnce starts the container and waits for it to end: by itself, by a
// failed liveness or startup probe, by pod deletion or by node stop. It
// returns the exit code, how long it ran, and an error if it never started.
func (c *container) runOnce(ctx context.Context) (int, time.Duration, error) {
	pod, _ := c.w.current()
	env, vals, err := c.w.containerEnv(pod, c.spec)
	if err != nil {
		c.setWaiting("CreateContainerConfigError", err.Error())
		return 0, 0, err
	}
	binary, argv, err := c.command(pod, vals)
	if err != nil {
		reason, msg := "RunContainerError", err.Error()
		if c.w.n.localImage(c.spec.Image) {
			// As a kubelet reports an image it cannot pull.
			reason, msg = "ErrImagePull", fmt.Sprintf("failed to pull image %q: %v", c.spec.Image, err)
		}
		c.setWaiting(reason, msg)
		return 0, 0, err
	}
	env = envPaths(env, c.spec.Env, c.w.rewriter(pod, c.spec, binary))
	dir := c.w.dir
	if c.spec.WorkingDir != "" {
		dir = c.w.rewriter(pod, c.spec, binary).String(c.spec.WorkingDir)
		_ = os.MkdirAll(dir, 0o755)
	}
	logf, err := os.OpenFile(c.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.setWaiting("RunContainerError", err.Error())
		return 0, 0, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, dir, logf, logf
	known, err := c.w.wellKnownMounts(pod, c.spec)
	if err != nil {
		logf.Close()
		c.setWaiting("RunContainerError", err.Error())
		return 0, 0, err
	}
	if err := podns.Prepare(cmd, c.w.n.nsMode, append(c.w.podMounts(), known...)); err != nil {
		logf.Close()
		c.setWaiting("RunContainerError", err.Error())
		return 0, 0, err
	}
	c.w.mu.Lock()
	restarts := c.restartCount
	if c.everStarted {
		restarts++
	}
	c.w.mu.Unlock()
	fmt.Fprintf(logf, "localnode: %s starting container %s (restart %d): %s\n", time.Now().UTC().Format(time.RFC3339Nano), c.spec.Name, restarts, strings.Join(argv, " "))
	if err := c.w.n.spawner.start(cmd); err != nil {
		logf.Close()
		c.setWaiting("RunContainerError", err.Error())
		return 0, 0, err
	}
	logf.Close()
	started := time.Now()
	c.w.mu.Lock()
	if c.everStarted {
		c.restartCount++
		if c.state.Terminated != nil {
			c.lastState = corev1.ContainerState{Terminated: c.state.Terminated}
		}
	}
	c.everStarted = true
	c.cmd = cmd
	c.containerID = "localnode://" + randomHex(32)
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}
	c.started = c.spec.StartupProbe == nil
	c.ready = c.started && c.spec.ReadinessProbe == nil && !c.init
	c.w.mu.Unlock()
	c.w.markDirty()
	c.w.log.V(2).Info("Started container", "container", c.spec.Name, "pid", cmd.Process.Pid)

	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = c.w.n.spawner.wait(cmd)
		close(exited)
	}()
	probeCtx, stopProbes := context.WithCancel(ctx)
	kill := make(chan killRequest, 1)
	if !c.init {
		go c.probe(probeCtx, started, env, binary, kill)
		if h := c.spec.Lifecycle; h != nil && h.PostStart != nil {
			go c.runHook(probeCtx, h.PostStart, time.Now().Add(2*time.Minute), env, binary, "postStart")
		}
	}
	reason := ""
	select {
	case <-exited:
	case k := <-kill:
		c.w.log.V(2).Info("Killing container", "container", c.spec.Name, "reason", k.reason)
		c.logLine("killing container %s: %s", c.spec.Name, k.reason)
		grace := c.w.podGrace()
		if k.grace != nil {
			grace = time.Duration(*k.grace) * time.Second
		}
		c.stop(ctx, cmd, exited, grace, env, binary)
	case <-c.w.terminating:
		c.w.mu.Lock()
		grace := c.w.grace
		c.w.mu.Unlock()
		c.stop(ctx, cmd, exited, grace, env, binary)
	case <-ctx.Done():
		signalGroup(cmd, syscall.SIGKILL)
		<-exited
	}
	stopProbes()
	finished := time.Now()
	code := exitCode(cmd, waitErr)
	// As a kubelet: the file at terminationMessagePath (here one under a
	// volume mount, read where the mount lives), else, under
	// FallbackToLogsOnError, the log's tail when the container failed.
	message := c.terminationMessage(pod, binary)
	if code == 0 {
		reason = "Completed"
	} else {
		reason = "Error"
		if message == "" && c.spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
			message = c.logTail()
		}
	}
	c.logLine("container %s exited with code %d after %s", c.spec.Name, code, finished.Sub(started).Round(time.Millisecond))
	c.w.mu.Lock()
	c.cmd = nil
	c.ready, c.started = false, false
	c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode:    int32(code),
		Reason:      reason,
		Message:     message,
		StartedAt:   metav1.NewTime(started),
		FinishedAt:  metav1.NewTime(finished),
		ContainerID: c.containerID,
	}}
	c.w.mu.Unlock()
	c.w.markDirty()
	c.w.log.V(2).Info("Container exited", "container", c.spec.Name, "exitCode", code)
	return code, finished.Sub(started), nil
}

func (w *podWorker) podGrace() time.Duration {
	if g := w.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return time.Duration(*g) * time.Second
	}
	return corev1.DefaultTerminationGracePeriodSeconds * time.Second
}

// stop runs the preStop hook, then sends SIGTERM, then SIGKILL when the
// grace period (at least minGraceAfterHook after the hook) is over.
func (c *container) stop(ctx context.Context, cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration, env []string, binary string) {
	deadline := time.Now().Add(grace)
	if h := c.spec.Lifecycle; h != nil && h.PreStop != nil {
		hookDone := make(chan struct{})
		go func() {
			defer close(hookDone)
			c.runHook(ctx, h.PreStop, deadline, env, binary, "preStop")
		}()
		select {
		case <-hookDone:
			// A container runtime takes a moment between the hook's end
			// and the stop signal; without it nats-server can take SIGTERM
			// before its lame duck mode (started in a goroutine) is set.
			select {
			case <-exited:
			case <-time.After(min(c.w.n.opts.StopSignalDelay, time.Until(deadline))):
			case <-ctx.Done():
			}
		case <-time.After(time.Until(deadline)):
		case <-ctx.Done():
		}
	}
	signalGroup(cmd, syscall.SIGTERM)
	remaining := time.Until(deadline)
	if remaining < minGraceAfterHook {
		remaining = minGraceAfterHook
	}
	select {
	case <-exited:
		return
	case <-time.After(remaining):
		c.logLine("grace period over: sending SIGKILL to container %s", c.spec.Name)
	case <-ctx.Done():
	}
	signalGroup(cmd, syscall.SIGKILL)
	<-exited
}

// runHook runs a lifecycle hook until it ends or deadline.
func (c *container) runHook(ctx context.Context, h *corev1.LifecycleHandler, deadline time.Time, env []string, binary, name string) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	pod, _ := c.w.current()
	switch {
	case h.Exec != nil:
		argv := c.w.rewriter(pod, c.spec, binary).Command(h.Exec.Command)
		c.logLine("running %s hook: %s", name, strings.Join(argv, " "))
		code, out, err := c.w.execIn(ctx, argv, env)
		if len(out) > 0 {
			c.logLine("%s hook output: %s", name, strings.TrimSpace(string(out)))
		}
		if err != nil || code != 0 {
			c.logLine("%s hook failed: exit code %d: %v", name, code, err)
		}
	case h.HTTPGet != nil:
		ok, msg := c.httpGet(ctx, h.HTTPGet)
		c.logLine("%s hook HTTP GET: ok=%v %s", name, ok, msg)
	case h.Sleep != nil:
		c.logLine("%s hook: sleeping %ds", name, h.Sleep.Seconds)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		}
	}
}

// execIn runs a command of the pod (an exec hook or probe) in the pod's
// directory and a mount namespace of its own, as a container's, to
// completion or until ctx ends, returning its exit code and output.
func (w *podWorker) execIn(ctx context.Context, argv, env []string) (int, []byte, error) {
	n := w.n
	if len(argv) == 0 {
		return -1, nil, errors.New("empty command")
	}
	path := argv[0]
	if !filepath.IsAbs(path) {
		p, err := exec.LookPath(path)
		if err != nil {
			return -1, nil, err
		}
		path = p
	}
	f, err := os.CreateTemp("", "localnode-exec-*")
	if err != nil {
		return -1, nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	cmd := exec.Command(path, argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, w.dir, f, f
	if err := podns.Prepare(cmd, n.nsMode, w.podMounts()); err != nil {
		return -1, nil, err
	}
	if err := n.spawner.start(cmd); err != nil {
		return -1, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- n.spawner.wait(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		signalGroup(cmd, syscall.SIGKILL)
		<-done
		err = ctx.Err()
	}
	out, _ := os.ReadFile(f.Name())
	return exitCode(cmd, err), out, err
}

func exitCode(cmd *exec.Cmd, err error) int {
	st := cmd.ProcessState
	if st == nil {
		return -1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// maxTerminationMessage is what a kubelet keeps of a termination message.
const maxTerminationMessage = 4096

// terminationMessage reads the container's terminationMessagePath when it
// lies under one of its volume mounts (the node gives containers no file
// of their own at /dev/termination-log), at most 4096 bytes; empty when
// there is none.
func (c *container) terminationMessage(pod *corev1.Pod, binary string) string {
	p := c.spec.TerminationMessagePath
	if p == "" {
		return ""
	}
	local := c.w.rewriter(pod, c.spec, binary).String(p)
	if local == p {
		return ""
	}
	b, err := os.ReadFile(local)
	if err != nil {
		return ""
	}
	if len(b) > maxTerminationMessage {
		b = b[:maxTerminationMessage]
	}
	return string(b)
}
