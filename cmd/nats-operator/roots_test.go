package main

import (
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Where the system has no CA certificates (the image holds none), the
// controller still has roots to verify a server by: the fallback bundle
// roots.go imports. Go reads the system's roots once per process, so the
// check runs in a child (this test binary again) that finds none.
func TestRootsWithoutTheSystems(t *testing.T) {
	if os.Getenv("NATS_OPERATOR_ROOTS_CHILD") == "1" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool.Equal(x509.NewCertPool()) {
			t.Fatalf("no roots without the system's: %v", err)
		}
		return
	}
	empty := t.TempDir()
	file := filepath.Join(empty, "none.pem")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRootsWithoutTheSystems$", "-test.count=1")
	cmd.Env = append(os.Environ(), "NATS_OPERATOR_ROOTS_CHILD=1", "SSL_CERT_FILE="+file, "SSL_CERT_DIR="+empty)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the child found no roots: %v\n%s", err, out)
	}
}
