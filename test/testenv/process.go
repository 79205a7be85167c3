package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// process is one control-plane program, run in its own process group with
// its output in a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error
}

// startProcess starts bin with args; stdout and stderr go to dir/<name>.log.
// The process gets its own process group (so that stopping it takes every
// child too) and SIGKILL when the test binary dies, so it cannot outlive
// the test even if cleanup never runs.
func startProcess(name, dir, bin string, args ...string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logFile, "+ %s %q\n", bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := spawn(cmd); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// spawn starts cmd from one OS thread that never exits. The parent-death
// signal fires when the thread that forked the child exits, not the
// process (golang/go#27505); a goroutine that locks its thread and returns
// (as network-namespace code does) makes Go end that thread, which would
// kill a control plane started from it.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawnReqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error)
	spawnReqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}

// pid returns the process id, which is also its process group id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, waits up to grace for the process
// to exit, then kills the whole group with SIGKILL and waits for the reap.
func (p *process) stop(grace time.Duration) {
	if !p.exited() {
		_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	// Always kill the group: a child of the process may still hold it.
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.done
}

// logTail returns the last n lines of the process log.
func (p *process) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// errExited is returned when a process exits while it is awaited.
var errExited = errors.New("exited")

// addrInUse reports whether the process log says a port was taken, so that
// the caller can retry on other ports.
func (p *process) addrInUse() bool {
	b, _ := os.ReadFile(p.logPath)
	return bytes.Contains(b, []byte("address already in use"))
}
