// Package helper is the child side of package podns: its init, run in a
// process podns started, sets up the mount namespace and execs the real
// command. It imports only os and syscall, so that a program's init
// reaches it before the heavy packages of a test binary.
package helper

import (
	"os"
	"syscall"
)

// Environment of the helper. Prepare sets them; the helper removes them
// before it execs the real command.
const (
	EnvExec   = "LOCALNODE_PODNS_EXEC"   // the real command's path
	EnvMounts = "LOCALNODE_PODNS_MOUNTS" // "source\ttarget\n" lines
	EnvParent = "LOCALNODE_PODNS_PARENT" // the parent's mount namespace
	EnvCheck  = "LOCALNODE_PODNS_CHECK"  // set: print the first target and exit
)

// ExitSetup is the helper's exit code when it cannot set up the namespace,
// as a container runtime's StartError.
const ExitSetup = 128

func init() {
	if os.Getenv(EnvExec) == "" && os.Getenv(EnvCheck) == "" {
		return
	}
	run()
}

// run runs in the new process: it refuses to touch mounts unless it is
// in a mount namespace other than its parent's, then mounts and execs.
func run() {
	fail := func(what string, err error) {
		msg := "localnode: pod namespace: " + what
		if err != nil {
			msg += ": " + err.Error()
		}
		_, _ = os.Stderr.WriteString(msg + "\n")
		os.Exit(ExitSetup)
	}
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		fail("reading the mount namespace", err)
	}
	if parent := os.Getenv(EnvParent); parent == "" || parent == self {
		fail("not in a mount namespace of its own ("+self+"); refusing to mount", nil)
	}
	// Mounts made here must not propagate to the machine's namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		fail("making mounts private", err)
	}
	sources, targets, err := ParseMounts(os.Getenv(EnvMounts))
	if err != nil {
		fail("reading the mounts", err)
	}
	for i := range sources {
		if err := syscall.Mount(sources[i], targets[i], "", syscall.MS_BIND, ""); err != nil {
			fail("bind-mounting "+sources[i]+" over "+targets[i], err)
		}
	}
	if os.Getenv(EnvCheck) != "" {
		if len(targets) > 0 {
			b, err := os.ReadFile(targets[0])
			if err != nil {
				fail("reading "+targets[0], err)
			}
			_, _ = os.Stdout.Write(b)
		}
		os.Exit(0)
	}
	path := os.Getenv(EnvExec)
	var env []string
	for _, kv := range os.Environ() {
		if !IsOurs(kv) {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(path, os.Args, env)
	fail("exec "+path, err)
}

func IsOurs(kv string) bool {
	for _, k := range []string{EnvExec, EnvMounts, EnvParent, EnvCheck} {
		if len(kv) > len(k) && kv[:len(k)] == k && kv[len(k)] == '=' {
			return true
		}
	}
	return false
}

// ParseMounts reads "source\ttarget\n" lines.
func ParseMounts(s string) (sources, targets []string, err error) {
	for len(s) > 0 {
		nl := indexByte(s, '\n')
		if nl < 0 {
			return nil, nil, syscall.EINVAL
		}
		line := s[:nl]
		s = s[nl+1:]
		tab := indexByte(line, '\t')
		if tab < 0 {
			return nil, nil, syscall.EINVAL
		}
		sources = append(sources, line[:tab])
		targets = append(targets, line[tab+1:])
	}
	return sources, targets, nil
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}
