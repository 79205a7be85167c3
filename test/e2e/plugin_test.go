package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// kubectlNats is the plugin built into a temporary directory, run against
// the stack's API server.
type kubectlNats struct {
	bin, kubeconfig, namespace string
}

func buildPlugin(t *testing.T, s *framework.Stack) kubectlNats {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubectl-nats")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/kubectl-nats").CombinedOutput()
	if err != nil {
		t.Fatalf("building kubectl-nats: %v\n%s", err, out)
	}
	return kubectlNats{bin: bin, kubeconfig: s.Env.KubeconfigPath, namespace: s.NS}
}

// run runs the plugin and returns its stdout (and stderr) and exit code.
func (k kubectlNats) run(ctx context.Context, t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig, "-n", k.namespace}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	}
	t.Fatalf("running kubectl-nats %v: %v", args, err)
	return "", -1
}

// planVerdict is plan -o json's verdict.
func (k kubectlNats) plan(ctx context.Context, t *testing.T, file string) (verdict struct {
	Action, Reason, Message string
	Servers                 []string
	ExitCode                int
}, code int) {
	t.Helper()
	out, code := k.run(ctx, t, "plan", "-f", file)
	t.Logf("kubectl nats plan -f %s (exit %d):\n%s", filepath.Base(file), code, out)
	jsonOut, jcode := k.run(ctx, t, "plan", "-f", file, "-o", "json")
	var res struct {
		Verdict json.RawMessage `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(jsonOut), &res); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, jsonOut)
	}
	if err := json.Unmarshal(res.Verdict, &verdict); err != nil {
		t.Fatal(err)
	}
	if jcode != code {
		t.Errorf("plan exited %d, with -o json %d", code, jcode)
	}
	return verdict, code
}

// manifest writes the example NatsCluster (file) with edit applied to its
// text, and the test clusters' lame duck grace period the Stack gave the
// running cluster (so plan sees only the edit).
func manifest(t *testing.T, dir, name, file string, edit func(string) string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "manifests", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(framework.WithTestLameDuckYAML(edit(string(b)))), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// kubectl nats on one cluster: status mid-way through a rolling upgrade,
// and plan for a version change (rolls), a server tag (reloads), adding
// auth with a stream present (held, naming it) and a scale-down, each
// checked against what the controller then does with the manifest.
func TestKubectlNatsPlugin(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsPlugin)
	k := buildPlugin(t, s)
	settledCluster(ctx, t, s, "2.15.1")
	_, pub := loadCluster(ctx, t, s)
	dir := t.TempDir()
	setVersion := func(v string) func(string) string {
		return func(m string) string { return strings.Replace(m, `version: "2.15.2"`, `version: "`+v+`"`, 1) }
	}
	tagged := func(m string) string { return strings.Replace(m, "spec:\n", "spec:\n  serverTags:\n    az: a\n", 1) }

	// 1. A version change rolls, one server at a time.
	v, code := k.plan(ctx, t, manifest(t, dir, "version.yaml", "natscluster-jetstream.yaml", setVersion("2.15.2")))
	if code != 0 || v.Action != "Roll" || v.Reason != clusterv1beta1.ReasonRollingRestart {
		t.Fatalf("plan for a version change: exit %d, %+v; want exit 0, Roll, RollingRestart", code, v)
	}
	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.2"}}`)
	poll.Eventually(t, 3*time.Minute, 200*time.Millisecond, "the rollout to be mid-way", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if r := nc.Status.Rollout; r == nil || len(r.Updated) == 0 || len(r.Pending) == 0 {
			return fmt.Errorf("rollout %+v", nc.Status.Rollout)
		}
		return nil
	})
	screen, code := k.run(ctx, t, "status", "demo")
	t.Logf("kubectl nats status demo, mid-rollout (exit %d):\n%s", code, screen)
	if code != 0 || !strings.Contains(screen, "rollout") || !strings.Contains(screen, "demo-0") {
		t.Errorf("status mid-rollout: exit %d", code)
	}
	if first := v.Servers[0]; !strings.Contains(screen, "updated    "+first) {
		t.Errorf("status does not show %s updated, the server plan said goes first", first)
	}
	nc := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 5*time.Minute)
	if nc.Status.Config.AppliedBy != clusterv1beta1.AppliedByRestart {
		t.Errorf("the version change was applied by %q, plan said it rolls", nc.Status.Config.AppliedBy)
	}

	// 2. A server tag reloads, without a restart.
	v, code = k.plan(ctx, t, manifest(t, dir, "tags.yaml", "natscluster-jetstream.yaml", tagged))
	if code != 0 || v.Action != "Reload" {
		t.Fatalf("plan for a server tag: exit %d, %+v; want exit 0, Reload", code, v)
	}
	patchCluster(ctx, t, s, `{"spec":{"serverTags":{"az":"a"}}}`)
	nc = s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
	if nc.Status.Config.AppliedBy != clusterv1beta1.AppliedByReload {
		t.Errorf("the server tag was applied by %q, plan said it reloads", nc.Status.Config.AppliedBy)
	}
	verifyNoLoss(ctx, t, s, pub)

	// 3. Adding auth with the stream ORDERS present is held, naming it.
	s.ApplyExampleFiltered(ctx, t, s.NS, "natscluster-auth.yaml", func(u *unstructured.Unstructured) bool { return u.GetKind() != "NatsCluster" })
	v, code = k.plan(ctx, t, manifest(t, dir, "auth.yaml", "natscluster-auth.yaml", tagged))
	if code != 2 || v.Reason != clusterv1beta1.ReasonAuthChangeBlocked || !strings.Contains(v.Message, "ORDERS") {
		t.Fatalf("plan for adding auth: exit %d, %+v; want exit 2, AuthChangeBlocked naming ORDERS", code, v)
	}
	patchCluster(ctx, t, s, `{"spec":{"auth":{"trustRef":{"name":"demo"},"systemCredentials":{"secretKeyRef":{"name":"demo-system-creds","key":"user.creds"}},"resolver":"Full","accountTrustRefs":[{"name":"demo-app"}]}}}`)
	nc = waitProgressing(ctx, t, s, s.NS, metav1.ConditionFalse, clusterv1beta1.ReasonAuthChangeBlocked, 30*time.Second)
	if got := progressingMessage(nc); got != v.Message {
		t.Errorf("the controller holds with\n%s\nplan said\n%s", got, v.Message)
	}
	screen, _ = k.run(ctx, t, "status", "demo")
	t.Logf("kubectl nats status demo, held:\n%s", screen)
	patchCluster(ctx, t, s, `{"spec":{"auth":null}}`)
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)

	// 4. A scale-down: plan's decision is the controller's.
	v, code = k.plan(ctx, t, manifest(t, dir, "scaledown.yaml", "natscluster-jetstream.yaml", func(m string) string {
		return strings.Replace(tagged(m), "replicas: 3", "replicas: 2", 1)
	}))
	if code != 0 && code != 2 {
		t.Fatalf("plan for a scale-down: exit %d, %+v", code, v)
	}
	patchCluster(ctx, t, s, `{"spec":{"replicas":2}}`)
	waitProgressing(ctx, t, s, s.NS, metav1.ConditionStatus(map[bool]string{true: "False", false: "True"}[code == 2]), v.Reason, 30*time.Second)
	t.Logf("the controller's Progressing reason for the scale-down is %s, as plan said", v.Reason)
}
