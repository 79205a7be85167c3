package kubectlnats

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// example is a manifest of manifests/examples with edit applied.
func example(t *testing.T, file string, edit func(string) string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "manifests", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), file)
	if err := os.WriteFile(p, []byte(edit(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func same(s string) string { return s }

// run runs kubectl-nats without a terminal and with no kubeconfig to find.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	var out bytes.Buffer
	code := Run(context.Background(), args, IO{In: strings.NewReader(""), Out: &out, Err: &out})
	return out.String(), code
}

// plan --from needs no cluster: the old manifest is simulated running and
// settled, and the exit code says what the controller would do.
func TestOfflinePlanExitCodes(t *testing.T) {
	old := example(t, "natscluster-jetstream.yaml", same)
	tests := []struct {
		name    string
		file    string
		extra   []string
		code    int
		action  Action
		reason  string
		contain []string
	}{
		{name: "the same manifest changes nothing", file: old, code: ExitOK, action: ActionNoChange, reason: clusterv1beta1.ReasonUpToDate},
		{name: "a version change rolls one server at a time, the highest ordinal first",
			file: example(t, "natscluster-jetstream.yaml", func(m string) string { return strings.Replace(m, `"2.15.2"`, `"2.15.1"`, 1) }),
			code: ExitOK, action: ActionRoll, reason: clusterv1beta1.ReasonRollingRestart, contain: []string{"image: nats:2.15.1", "first demo-2"}},
		{name: "a server tag reloads",
			file: example(t, "natscluster-jetstream.yaml", func(m string) string { return strings.Replace(m, "spec:\n", "spec:\n  serverTags:\n    az: a\n", 1) }),
			code: ExitOK, action: ActionReload, reason: clusterv1beta1.ReasonReloading, contain: []string{`"az:a"`}},
		{name: "a scale-up creates the new server",
			file: example(t, "natscluster-jetstream.yaml", func(m string) string { return strings.Replace(m, "replicas: 3", "replicas: 4", 1) }),
			code: ExitOK, action: ActionScaleUp, reason: clusterv1beta1.ReasonScalingUp, contain: []string{"server demo-3: new"}},
		{name: "adding auth with a stream present is held, naming the stream",
			file: example(t, "natscluster-auth.yaml", same), extra: []string{"--stream", "$G/ORDERS"},
			code: ExitHeld, action: ActionHeld, reason: clusterv1beta1.ReasonAuthChangeBlocked, contain: []string{"ORDERS", clusterv1beta1.RestartAllResetJetStream}},
		{name: "an invalid spec names the field",
			file: example(t, "natscluster-jetstream.yaml", func(m string) string { return strings.Replace(m, "storage: 1Gi", "storage: \"0\"", 1) }),
			code: ExitInvalid, action: ActionInvalid, reason: clusterv1beta1.ReasonInvalidSpec, contain: []string{"spec.jetstream.volumeClaimTemplate.spec.resources.requests.storage"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"plan", "-f", tt.file, "--from", old}, tt.extra...)
			out, code := run(t, args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tt.code, out)
			}
			for _, c := range tt.contain {
				if !strings.Contains(out, c) {
					t.Errorf("output lacks %q:\n%s", c, out)
				}
			}
			jsonOut, jcode := run(t, append(args, "-o", "json")...)
			var res PlanResult
			if err := json.Unmarshal([]byte(jsonOut), &res); err != nil {
				t.Fatalf("%v:\n%s", err, jsonOut)
			}
			if jcode != code || res.Verdict.Action != tt.action || res.Verdict.Reason != tt.reason || res.Verdict.Exit != code {
				t.Errorf("-o json: exit %d, verdict %+v; want %s %s", jcode, res.Verdict, tt.action, tt.reason)
			}
		})
	}
}

func TestExitCodesOfUsageAndConfirmation(t *testing.T) {
	old := example(t, "natscluster-jetstream.yaml", same)
	tests := []struct {
		name string
		args []string
		code int
		say  string
	}{
		{"a field the API does not know is an invalid manifest, named", []string{"plan", "-f",
			example(t, "natscluster-jetstream.yaml", func(m string) string { return strings.Replace(m, "replicas: 3", "replicas: 3\n  replica: 3", 1) }), "--from", old},
			ExitInvalid, `unknown field "replica"`},
		{"a file without a NatsCluster is invalid", []string{"plan", "-f", writeFile(t, "kind: ConfigMap\n"), "--from", old}, ExitInvalid, "no NatsCluster"},
		{"plan without -f is an error", []string{"plan"}, ExitError, "-f manifest.yaml is required"},
		{"plan without a cluster and without --from is an error", []string{"plan", "-f", old}, ExitError, "error: "},
		{"an unknown command is an error", []string{"frobnicate"}, ExitError, "unknown command"},
		{"force-step of a server of another cluster is refused before anything is read", []string{"force-step", "demo", "other-1", "--yes"}, ExitError, "not a server of NatsCluster demo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, code := run(t, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.say) {
				t.Errorf("exit %d, want %d, output %q lacking %q", code, tt.code, out, tt.say)
			}
		})
	}
}

func writeFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// tableCase is a case of the planner's table tests, recorded by
// go test ./pkg/rollout -write-table-cases (pkg/rollout/tablecases_test.go).
type tableCase struct {
	Name     string           `json:"name"`
	Input    rollout.Input    `json:"input"`
	Decision rollout.Decision `json:"decision"`
}

// For every case of the planner's table tests, plan says what the planner
// decided: the same reason and message, the servers of the step, held
// (exit 2) exactly when the planner holds for the user, invalid (exit 3)
// for an invalid spec, else exit 0.
func TestVerdictMatchesThePlannerOnEveryTableCase(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "pkg", "rollout", "testdata", "table_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []tableCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 100 {
		t.Fatalf("%d recorded cases: record them again", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			d := rollout.Plan(c.Input)
			// The recording is current: the planner still decides so.
			if d.Progressing.Reason != c.Decision.Progressing.Reason || d.Progressing.Message != c.Decision.Progressing.Message ||
				!reflect.DeepEqual(d.Step, c.Decision.Step) && (d.Step == nil || c.Decision.Step == nil || d.Step.Kind != c.Decision.Step.Kind) {
				t.Fatalf("the planner now decides %s %q, recorded %s %q: record the cases again",
					d.Progressing.Reason, d.Progressing.Message, c.Decision.Progressing.Reason, c.Decision.Progressing.Message)
			}
			v := Judge(d)
			if v.Reason != d.Progressing.Reason || v.Message != d.Progressing.Message {
				t.Errorf("plan says %s %q, the planner %s %q", v.Reason, v.Message, d.Progressing.Reason, d.Progressing.Message)
			}
			held := d.Hold != nil && d.Hold.Notify && d.Hold.Reason != clusterv1beta1.ReasonInvalidSpec
			invalid := d.Hold != nil && d.Hold.Reason == clusterv1beta1.ReasonInvalidSpec
			switch {
			case held && (v.Exit != ExitHeld || v.Action != ActionHeld || v.WaitingFor != d.Hold.WaitingFor):
				t.Errorf("the planner holds (%s), plan says %s exit %d", d.Hold.Reason, v.Action, v.Exit)
			case invalid && v.Exit != ExitInvalid:
				t.Errorf("InvalidSpec, plan exits %d", v.Exit)
			case !held && !invalid && v.Exit != ExitOK:
				t.Errorf("the planner does not hold, plan exits %d (%s)", v.Exit, v.Action)
			}
			if s := d.Step; s != nil {
				want := map[rollout.StepKind]Action{rollout.RestartOne: ActionRoll, rollout.RestartAll: ActionRestartAll, rollout.Reload: ActionReload, rollout.ExpandClaim: ActionExpand}[s.Kind]
				if s.Kind == rollout.RemoveServer {
					want = ActionScaleDown
					if s.Remove.Replace {
						want = ActionReplace
					}
				}
				if v.Action != want {
					t.Errorf("a %s step, plan says %s", s.Kind, v.Action)
				}
				if (s.Kind == rollout.RestartOne || s.Kind == rollout.RestartAll) && !reflect.DeepEqual(v.Servers, s.Servers) {
					t.Errorf("the step restarts %v, plan names %v", s.Servers, v.Servers)
				}
			}
			if d.Step == nil && d.Hold == nil && len(d.Create) > 0 && !reflect.DeepEqual(v.Servers, d.Create) {
				t.Errorf("the planner creates %v, plan names %v", d.Create, v.Servers)
			}
		})
	}
}

// status shows how many servers the cluster can lose now, and which groups
// limit it, from status.jetstream.faultTolerance.
func TestStatusShowsTheFaultTolerance(t *testing.T) {
	v := &StatusView{Cluster: "demo", JetStream: &clusterv1beta1.JetStreamStatus{FaultTolerance: &clusterv1beta1.FaultTolerance{
		Servers: 0,
		Groups: []clusterv1beta1.GroupFaultTolerance{
			{Group: "stream $G/ORDERS", Replicas: 2, Current: 2, FaultTolerance: 0},
			{Group: "meta", Replicas: 3, Current: 3, FaultTolerance: 1},
		},
	}}}
	var out bytes.Buffer
	printStatus(&out, v, time.Now())
	want := "tolerates    0 servers down: stream $G/ORDERS R2 (2 of 2 current) tolerates 0;\n" +
		"             meta R3 (3 of 3 current) tolerates 1\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("status screen:\n%s\nwant the lines\n%s", out.String(), want)
	}
	v.JetStream.FaultTolerance = &clusterv1beta1.FaultTolerance{Servers: 1}
	out.Reset()
	printStatus(&out, v, time.Now())
	if !strings.Contains(out.String(), "tolerates    1 server down\n") {
		t.Errorf("status screen:\n%s\nwant \"tolerates    1 server down\"", out.String())
	}
}

// status lists, under each server, the clusters it has a gateway to and
// the hub servers it is a leaf of, from status.servers.
func TestStatusShowsGatewaysAndLeafnodesPerServer(t *testing.T) {
	v := &StatusView{Cluster: "east", Servers: []ServerView{
		{Name: "east-0", Ready: true, Gateways: []string{"north", "west"}, Leafnodes: []string{"hub-1"}},
		{Name: "east-1", Ready: true},
	}}
	var out bytes.Buffer
	printStatus(&out, v, time.Now())
	for _, want := range []string{"east-0 ", "  gateways to: north, west\n", "  leaf of: hub-1\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status screen:\n%s\nwant %q", out.String(), want)
		}
	}
	if strings.Count(out.String(), "gateways to:") != 1 {
		t.Errorf("status screen:\n%s\nwant one gateways line (east-1 has none)", out.String())
	}
}

// Manifests that name their namespace are planned in it without -n, offline
// (a version change rolls, first demo-2, not a scale-up of an empty
// cluster); with -n naming another namespace plan is an error naming both.
func TestPlanUsesTheManifestsNamespace(t *testing.T) {
	inNats := func(m string) string {
		return strings.Replace(m, "  name: demo\n", "  name: demo\n  namespace: nats\n", 1)
	}
	old := example(t, "natscluster-jetstream.yaml", func(m string) string { return inNats(strings.Replace(m, `"2.15.2"`, `"2.15.1"`, 1)) })
	upgraded := example(t, "natscluster-jetstream.yaml", inNats)
	out, code := run(t, "plan", "--from", old, "-f", upgraded)
	if code != ExitOK || !strings.Contains(out, "first demo-2") || !strings.Contains(out, "RollingRestart") {
		t.Fatalf("without -n: exit %d, want a rolling restart first demo-2:\n%s", code, out)
	}
	jsonOut, _ := run(t, "plan", "--from", old, "-f", upgraded, "-o", "json")
	var res PlanResult
	if err := json.Unmarshal([]byte(jsonOut), &res); err != nil || res.Cluster != "nats/demo" {
		t.Errorf("-o json: cluster %q (%v), want nats/demo", res.Cluster, err)
	}
	out, code = run(t, "plan", "--from", old, "-f", upgraded, "-n", "nats")
	if code != ExitOK {
		t.Errorf("with -n nats: exit %d:\n%s", code, out)
	}
	out, code = run(t, "plan", "--from", old, "-f", upgraded, "-n", "other")
	if code != ExitError || !strings.Contains(out, "namespace nats") || !strings.Contains(out, "-n is other") {
		t.Fatalf("with -n other: exit %d, want %d and both namespaces named:\n%s", code, ExitError, out)
	}
	t.Logf("with -n other: %s", strings.TrimSpace(out))
}
