package localnode

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
)

// spawner starts every process from one goroutine locked to its OS thread.
// Pdeathsig fires when the thread that forked the child exits, so a thread
// that lives as long as the process makes "SIGKILL when the node's process
// dies" hold even if the test binary is killed with SIGKILL.
type spawner struct {
	reqs chan spawnReq

	mu   sync.Mutex
	pids []int
	// live maps the pid of each running process group leader to its command.
	live map[int]*exec.Cmd
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), live: map[int]*exec.Cmd{}}
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread must outlive every child.
		for r := range s.reqs {
			r.done <- r.cmd.Start()
		}
	}()
	return s
}

// start starts cmd in its own process group, to be killed with SIGKILL if
// this process dies. Wait must be called through wait.
func (s *spawner) start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	done := make(chan error, 1)
	s.reqs <- spawnReq{cmd: cmd, done: done}
	if err := <-done; err != nil {
		return err
	}
	s.mu.Lock()
	s.pids = append(s.pids, cmd.Process.Pid)
	s.live[cmd.Process.Pid] = cmd
	s.mu.Unlock()
	return nil
}

// wait waits for cmd and forgets it; the process group is killed so no
// grandchild survives its leader.
func (s *spawner) wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	pid := cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	s.mu.Lock()
	delete(s.live, pid)
	s.mu.Unlock()
	return err
}

// signal sends sig to the process group of cmd.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}

// killAll sends SIGKILL to every live process group.
func (s *spawner) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid := range s.live {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// allPIDs returns every pid ever started, live or not.
func (s *spawner) allPIDs() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.pids...)
}

// ProcessAlive reports whether pid names a process that is not a zombie.
func ProcessAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return false
	}
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
		}
	}
	return true
}

func itoa(i int) string {
	return strconv.Itoa(i)
}
