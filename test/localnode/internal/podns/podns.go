// Package podns starts a command in a mount namespace of its own with
// private files bind-mounted over some of the machine's (the local node's
// /etc/hosts and /etc/resolv.conf of a pod), leaving the machine's files
// and mounts alone.
//
// Go cannot run code between fork and exec, so the command is started as
// this program itself (/proc/self/exe) in a new mount namespace, with the
// mounts and the real command in environment variables. The init of
// package helper (imported here) sees them, makes every mount private,
// bind-mounts the files and execs the real command in the same process:
// the pid, process group and parent-death signal the parent set stay those
// of the real command. Every program that imports this package
// (test/localnode does, so every test binary and command using a local
// node) can therefore start such commands. helper imports only os and
// syscall, so its init runs before the heavy ones of a test binary: the
// detour costs about 10 ms and 12 MB for that time.
package podns

import (
	"os"
	"os/exec"
	"syscall"

	"github.com/nats-operator/nats-operator/test/localnode/internal/podns/helper"
)

// The helper's environment and exit code.
const (
	envExec   = helper.EnvExec
	envMounts = helper.EnvMounts
	envParent = helper.EnvParent
	envCheck  = helper.EnvCheck
	exitSetup = helper.ExitSetup
)

// Mount is a file (or directory) bind-mounted over Target in the new
// namespace only.
type Mount struct {
	Source, Target string
}

func formatMounts(ms []Mount) (string, error) {
	var s string
	for _, m := range ms {
		for _, p := range []string{m.Source, m.Target} {
			if p == "" || p[0] != '/' {
				return "", &os.PathError{Op: "podns", Path: p, Err: syscall.EINVAL}
			}
			for i := 0; i < len(p); i++ {
				if p[i] == '\t' || p[i] == '\n' {
					return "", &os.PathError{Op: "podns", Path: p, Err: syscall.EINVAL}
				}
			}
		}
		s += m.Source + "\t" + m.Target + "\n"
	}
	return s, nil
}

// Mode is how a new mount namespace is made.
type Mode int

const (
	// Unavailable: this process may not make mount namespaces.
	Unavailable Mode = iota
	// Privileged: a mount namespace (CLONE_NEWNS), which needs
	// CAP_SYS_ADMIN, as root has.
	Privileged
	// UserNamespace: a user namespace that maps the caller's uid and gid to
	// 0, owning a new mount namespace (CLONE_NEWUSER|CLONE_NEWNS), for an
	// unprivileged caller where unprivileged user namespaces are allowed.
	// The command sees itself as root; its files belong to the caller.
	UserNamespace
)

func (m Mode) String() string {
	switch m {
	case Privileged:
		return "mount namespace"
	case UserNamespace:
		return "user and mount namespace"
	}
	return "unavailable"
}

// Prepare makes cmd, not yet started, run in a new mount namespace with
// mounts: it starts /proc/self/exe (this program) with cmd.Args, which
// mounts and execs cmd.Path. cmd.Path must be absolute. cmd.SysProcAttr
// is kept apart from the namespace flags added to it.
func Prepare(cmd *exec.Cmd, mode Mode, mounts []Mount) error {
	if cmd.Path == "" || cmd.Path[0] != '/' {
		return &os.PathError{Op: "podns", Path: cmd.Path, Err: syscall.EINVAL}
	}
	return prepare(cmd, mode, mounts, envExec+"="+cmd.Path)
}

func prepare(cmd *exec.Cmd, mode Mode, mounts []Mount, what string) error {
	ms, err := formatMounts(mounts)
	if err != nil {
		return err
	}
	parent, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	a := cmd.SysProcAttr
	switch mode {
	case Privileged:
		// Go makes every mount private (MS_REC|MS_PRIVATE on /) in the
		// child before exec when it unshares CLONE_NEWNS.
		a.Unshareflags |= syscall.CLONE_NEWNS
	case UserNamespace:
		a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		a.GidMappingsEnableSetgroups = false
	default:
		return errUnavailable
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	var clean []string
	for _, kv := range env {
		if !helper.IsOurs(kv) {
			clean = append(clean, kv)
		}
	}
	cmd.Env = append(clean, what, envMounts+"="+ms, envParent+"="+parent)
	if len(cmd.Args) == 0 {
		cmd.Args = []string{cmd.Path}
	}
	cmd.Path = "/proc/self/exe"
	return nil
}

// Error is a failure to set up the namespace.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

var errUnavailable = &Error{"podns: this process may not make mount namespaces"}

// Check starts the helper in mode with mounts and returns what it reads
// from the first mount's target inside the new namespace.
func Check(mode Mode, mounts []Mount) ([]byte, error) {
	cmd := &exec.Cmd{Path: "podns-check", Args: []string{"podns-check"}}
	if err := prepare(cmd, mode, mounts, envCheck+"=1"); err != nil {
		return nil, err
	}
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return nil, &Error{trimNewline(string(ee.Stderr))}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Detect returns the first mode in which a file bind-mounted over target
// (such as /etc/hosts) is what the new namespace reads there, while this
// process still reads the original: Privileged, else UserNamespace. dir
// holds a scratch file. With neither, it returns Unavailable and why.
func Detect(dir, target string) (Mode, error) {
	before, err := os.ReadFile(target)
	if err != nil {
		return Unavailable, err
	}
	f, err := os.CreateTemp(dir, "podns-check-*")
	if err != nil {
		return Unavailable, err
	}
	defer os.Remove(f.Name())
	marker := "# podns check " + f.Name() + "\n"
	_, err = f.WriteString(marker)
	f.Close()
	if err != nil {
		return Unavailable, err
	}
	var msgs string
	for _, mode := range []Mode{Privileged, UserNamespace} {
		got, err := Check(mode, []Mount{{Source: f.Name(), Target: target}})
		if err == nil && string(got) != marker {
			err = &Error{"reads " + target + " unchanged"}
		}
		if err == nil {
			after, err := os.ReadFile(target)
			if err != nil || string(after) != string(before) {
				return Unavailable, &Error{"podns: " + target + " changed outside the namespace"}
			}
			return mode, nil
		}
		if msgs != "" {
			msgs += "; "
		}
		msgs += mode.String() + ": " + err.Error()
	}
	return Unavailable, &Error{"podns: " + msgs}
}

func trimNewline(s string) string {
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	return s
}
