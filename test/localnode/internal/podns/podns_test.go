package podns

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func detect(t *testing.T) Mode {
	t.Helper()
	mode, err := Detect(t.TempDir(), "/etc/hosts")
	if err != nil {
		t.Skipf("no mount namespaces here: %v", err)
	}
	t.Logf("mode: %s", mode)
	return mode
}

func TestACommandReadsItsOwnHostsFileAndTheMachineKeepsItsOwn(t *testing.T) {
	mode := detect(t)
	before, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.9\tdemo-0-0.demo-headless.ns.svc.cluster.local\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(sh, "-c", `cat /etc/hosts; echo "args: $0 $1"; env | grep -c LOCALNODE_PODNS || true`, "zero", "one")
	start := time.Now()
	if err := Prepare(cmd, mode, []Mount{{Source: hosts, Target: "/etc/hosts"}}); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("ran in %s:\n%s", time.Since(start).Round(time.Microsecond), out)
	want := "127.0.0.9\tdemo-0-0.demo-headless.ns.svc.cluster.local\nargs: zero one\n0\n"
	if string(out) != want {
		t.Errorf("output %q, want %q", out, want)
	}
	after, err := os.ReadFile("/etc/hosts")
	if err != nil || string(after) != string(before) {
		t.Errorf("the machine's /etc/hosts changed: %q -> %q (%v)", before, after, err)
	}
}

func TestAFileRewrittenInPlaceReachesARunningCommand(t *testing.T) {
	mode := detect(t)
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.2 old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(sh, "-c", `cat /etc/hosts; echo ---; read x; cat /etc/hosts`)
	if err := Prepare(cmd, mode, []Mount{{Source: hosts, Target: "/etc/hosts"}}); err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first cat has read the whole file once the marker comes.
	r := bufio.NewReader(stdout)
	var first string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("%v: %s", err, errOut.String())
		}
		if line == "---\n" {
			break
		}
		first += line
	}
	f, err := os.OpenFile(hosts, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("127.0.0.3 new\n127.0.0.4 more\n"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, _ = stdin.Write([]byte("go\n"))
	rest, _ := io.ReadAll(r)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	if got, want := first+string(rest), "127.0.0.2 old\n127.0.0.3 new\n127.0.0.4 more\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

func TestTheHelperRefusesToMountInItsParentsNamespace(t *testing.T) {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.9 x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// As Prepare would, but without a new namespace.
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), envExec+"=/bin/true", envMounts+"="+hosts+"\t/etc/hosts\n", envParent+"="+self)
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitSetup || !strings.Contains(string(out), "refusing to mount") {
		t.Fatalf("helper in the parent's namespace: %v: %s", err, out)
	}
	t.Logf("refused: %s", strings.TrimSpace(string(out)))
}
