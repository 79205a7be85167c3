package localnode

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestImageVersion(t *testing.T) {
	tests := []struct {
		name, image, want string
	}{
		{"a plain tag gives its version", "nats:2.15.1", "2.15.1"},
		{"a registry path with a variant gives the version", "docker.io/library/nats:2.15.1-alpine", "2.15.1"},
		{"a tag with a digest gives the version", "nats:2.15.1@sha256:0123456789abcdef", "2.15.1"},
		{"a registry with a port is not taken for a tag", "localhost:5000/nats:2.14.0", "2.14.0"},
		{"a release candidate keeps its suffix", "nats:2.16.0-RC.1", "2.16.0-RC.1"},
		{"no tag gives the default version", "nats", DefaultVersion},
		{"latest gives the default version", "nats:latest", DefaultVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := imageVersion(tt.image)
			if err != nil || got != tt.want {
				t.Errorf("imageVersion(%q) = %q, %v; want %q", tt.image, got, err, tt.want)
			}
		})
	}
	if !isNATSImage("docker.io/library/nats:2.15.1@sha256:00") || isNATSImage("busybox:1") {
		t.Errorf("isNATSImage misjudged an image")
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		name     string
		failures int
		want     time.Duration
	}{
		{"the first restart is immediate", 0, 0},
		{"the second restart waits the base", 1, time.Second},
		{"later restarts double", 3, 4 * time.Second},
		{"the delay is capped", 20, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backoff(tt.failures, time.Second, 30*time.Second); got != tt.want {
				t.Errorf("backoff(%d) = %s, want %s", tt.failures, got, tt.want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	vals := map[string]string{"POD_NAME": "demo-0-0", "X": "1"}
	tests := []struct{ name, in, want string }{
		{"a known variable is replaced", "--name=$(POD_NAME)", "--name=demo-0-0"},
		{"an unknown variable is kept", "$(NOPE)", "$(NOPE)"},
		{"a doubled dollar escapes", "$$(X)", "$(X)"},
		{"a lone dollar is kept", "a$b", "a$b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := expand(tt.in, vals); got != tt.want {
				t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestWriteAtomicReplacesFilesThroughDataLink(t *testing.T) {
	dir := t.TempDir()
	changed, err := writeAtomic(dir, map[string]file{"a.conf": {data: []byte("1"), mode: 0o644}, "b": {data: []byte("x"), mode: 0o600}})
	if err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	changed, err = writeAtomic(dir, map[string]file{"a.conf": {data: []byte("1"), mode: 0o644}, "b": {data: []byte("x"), mode: 0o600}})
	if err != nil || changed {
		t.Fatalf("same write: changed=%v err=%v", changed, err)
	}
	changed, err = writeAtomic(dir, map[string]file{"a.conf": {data: []byte("2"), mode: 0o644}})
	if err != nil || !changed {
		t.Fatalf("second write: changed=%v err=%v", changed, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.conf")); err != nil || string(b) != "2" {
		t.Errorf("a.conf = %q, %v; want 2", b, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "b")); !os.IsNotExist(err) {
		t.Errorf("b still exists: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 { // ..data, one timestamped dir, a.conf
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("dir holds %v, want ..data, one data dir and a.conf", names)
	}
}

func TestAddressesAreDistinctAndStable(t *testing.T) {
	a, err := newAddresses()
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	seen := map[string]string{}
	for i := 0; i < 600; i++ {
		name := filepath.Join("p", string(rune('a'+i%26)), time.Duration(i).String())
		ip := a.get("ns", name)
		if other, ok := seen[ip]; ok {
			t.Fatalf("%s given to %s and %s", ip, other, name)
		}
		seen[ip] = name
		if again := a.get("ns", name); again != ip {
			t.Fatalf("address of %s changed from %s to %s", name, ip, again)
		}
	}
}
