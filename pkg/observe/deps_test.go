package observe

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/nats-operator/nats-operator"

// TestObserveTalksToNATSOnly enforces the package boundary (pkg/observe/doc.go) with go list:
// the observer asks NATS servers over HTTP and reads nothing from
// Kubernetes, so nothing it depends on reaches a clientset, an informer or
// the operator's other packages (pkg/act included: observe only reads).
func TestObserveTalksToNATSOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{"k8s.io/client-go", module + "/pkg/generated", module + "/pkg/controller",
		module + "/pkg/render", module + "/pkg/rollout", module + "/pkg/act"}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list printed %d packages; the check would prove nothing", len(deps))
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("pkg/observe depends on %s", dep)
			}
		}
	}
}
