package kubectlnats

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// TestThePluginCarriesNoFakes: kubectl nats plan gathers from a live
// cluster's informers or from manifests (controller.StaticSources), never
// on client-go's fake clientsets, so no fake package ships in the plugin
// binary. (k8s.io/client-go/testing does: client-go/gentype, under every
// generated clientset, imports it.)
func TestThePluginCarriesNoFakes(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/nats-operator/nats-operator/cmd/kubectl-nats").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list printed %d packages; the check would prove nothing", len(deps))
	}
	found := false
	for _, p := range deps {
		if strings.HasSuffix(p, "/fake") || strings.Contains(p, "/fake/") {
			t.Errorf("kubectl-nats links %s", p)
		}
		found = found || p == "github.com/nats-operator/nats-operator/pkg/controller"
	}
	if !found {
		t.Error("kubectl-nats does not link pkg/controller: it would not decide as the controller does")
	}
}

// TestEveryStepKindHasAPlanVerdict: kubectl nats plan says of every kind
// of step what it does (an action and a sentence), not the kind's bare
// name, which is what stepVerdict falls back to for a kind it lacks.
func TestEveryStepKindHasAPlanVerdict(t *testing.T) {
	if len(rollout.StepKinds) < 5 {
		t.Fatalf("rollout.StepKinds has %d kinds; the check would prove nothing", len(rollout.StepKinds))
	}
	for _, k := range rollout.StepKinds {
		action, _, sentence := stepVerdict(&rollout.Step{Kind: k, Servers: []string{"demo-0"}})
		if action == "" || sentence == string(k) {
			t.Errorf("%s: plan says %q %q, the kind's bare name", k, action, sentence)
		}
	}
}
