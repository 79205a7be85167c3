package rollout

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/nats-operator/nats-operator"

// TestImportsStayPure enforces the dependency rule of doc.go with go list: the
// planner imports only pkg/apis, k8s.io/api, k8s.io/apimachinery and the
// standard library, and nothing it depends on reaches client-go, NATS, or the
// operator's observe, render or controller packages.
func TestImportsStayPure(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go not on PATH")
	}
	list := func(format string) []string {
		out, err := exec.Command("go", "list", "-deps", "-f", format, ".").Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		return strings.Fields(string(out))
	}
	direct, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := []string{module + "/pkg/apis/", "k8s.io/api/", "k8s.io/apimachinery/"}
	for _, imp := range strings.Fields(string(direct)) {
		std := !strings.Contains(strings.Split(imp, "/")[0], ".")
		ok := std
		for _, a := range allowed {
			ok = ok || strings.HasPrefix(imp, a)
		}
		if !ok {
			t.Errorf("pkg/rollout imports %s; only pkg/apis, k8s.io/api, k8s.io/apimachinery and the standard library are allowed", imp)
		}
		if imp == "log" || imp == "log/slog" {
			t.Errorf("pkg/rollout imports %s: the planner never logs", imp)
		}
	}
	forbidden := []string{"k8s.io/client-go", "github.com/nats-io/", "k8s.io/klog/v2/klogr",
		module + "/pkg/observe", module + "/pkg/render", module + "/pkg/controller", module + "/pkg/generated"}
	for _, dep := range list("{{.ImportPath}}") {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("pkg/rollout depends on %s", dep)
			}
		}
	}
}

// TestNoClockOrLogging: the planner takes time as Input.Now and never logs.
func TestNoClockOrLogging(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, banned := range []string{"time.Now(", "time.Since(", "klog.", "rand."} {
			if strings.Contains(string(src), banned) {
				t.Errorf("%s uses %s", f, banned)
			}
		}
		if _, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
