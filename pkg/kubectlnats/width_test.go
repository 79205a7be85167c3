package kubectlnats

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/version"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// longLines are the lines of out wider than width columns.
func longLines(out string, width int) []string {
	var long []string
	for _, l := range strings.Split(out, "\n") {
		if utf8.RuneCountInString(l) > width {
			long = append(long, l)
		}
	}
	return long
}

// words is s with every run of spaces and line breaks made one space.
func words(s string) string { return strings.Join(strings.Fields(s), " ") }

// squeezed is s without spaces and line breaks: what is left of prose
// filled at any width, a word too long for a line cut included.
func squeezed(s string) string { return strings.Join(strings.Fields(s), "") }

// plan's screen fits in 100 columns for the changes a user plans most (a
// version change, an auth change held for a stream, a scale-down, a reload,
// a scale-up, an invalid spec), in a temporary directory with a long name:
// the planner's long messages and the notes are filled under their label,
// and nothing of them is lost (the words of the verdict's sentence and
// message, as -o json has them, are all on the screen, in order).
func TestPlanFitsInAHundredColumns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("a-directory-with-a-long-name-", 3))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, file string, edit func(string) string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(edit(readExample(t, file))), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := write("old.yaml", "natscluster-jetstream.yaml", same)
	tests := []struct {
		name, file string
		extra      []string
		code       int
	}{
		{"a version change", write("version.yaml", "natscluster-jetstream.yaml", func(m string) string { return strings.Replace(m, `"2.15.2"`, `"2.15.1"`, 1) }), nil, ExitOK},
		{"adding auth with a stream present, held", write("auth.yaml", "natscluster-auth.yaml", same), []string{"--stream", "$G/ORDERS"}, ExitHeld},
		{"a scale-down", write("scaledown.yaml", "natscluster-jetstream.yaml", func(m string) string { return strings.Replace(m, "replicas: 3", "replicas: 2", 1) }), nil, ExitOK},
		{"a server tag", write("tags.yaml", "natscluster-jetstream.yaml", func(m string) string { return strings.Replace(m, "spec:\n", "spec:\n  serverTags:\n    az: a\n", 1) }), nil, ExitOK},
		{"a scale-up", write("scaleup.yaml", "natscluster-jetstream.yaml", func(m string) string { return strings.Replace(m, "replicas: 3", "replicas: 5", 1) }), nil, ExitOK},
		{"an invalid spec", write("invalid.yaml", "natscluster-jetstream.yaml", func(m string) string { return strings.Replace(m, "storage: 1Gi", "storage: \"0\"", 1) }), nil, ExitInvalid},
	}
	wrapped := false
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"plan", "-f", tt.file, "--from", old}, tt.extra...)
			out, code := run(t, args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tt.code, out)
			}
			if long := longLines(out, planWidth); len(long) > 0 {
				t.Errorf("%d lines wider than %d columns:\n%s\n\nthe screen:\n%s", len(long), planWidth, strings.Join(long, "\n"), out)
			}
			jsonOut, _ := run(t, append(args, "-o", "json")...)
			var res PlanResult
			if err := json.Unmarshal([]byte(jsonOut), &res); err != nil {
				t.Fatalf("%v:\n%s", err, jsonOut)
			}
			v := res.Verdict
			screen := squeezed(out)
			for _, part := range []string{"decision: " + v.Sentence, "reason: " + v.Reason, "message: " + v.Message, "against " + res.Against} {
				if !strings.Contains(screen, squeezed(part)) {
					t.Errorf("the screen lacks %q:\n%s", part, out)
				}
			}
			for _, n := range res.Notes {
				if !strings.Contains(screen, squeezed("note: "+n)) {
					t.Errorf("the screen lacks the note %q:\n%s", n, out)
				}
			}
			if len("  message: "+v.Message) > planWidth || len("decision: "+v.Sentence) > planWidth {
				wrapped = true
			}
			t.Logf("kubectl nats plan (%s):\n%s", tt.name, out)
		})
	}
	if !wrapped {
		t.Error("no verdict was wider than the screen: the test proves nothing about filling")
	}
}

func readExample(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "manifests", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fill breaks prose at spaces under a hanging indent, cuts only a word too
// long for a line, and keeps every word.
func TestFill(t *testing.T) {
	tests := []struct {
		head, text string
		width      int
		want       string
	}{
		{"note: ", "short", 20, "note: short"},
		{"note: ", "one two three four five six", 20, "note: one two three\n      four five six"},
		{"note: ", "  spaces   and\nbreaks  ", 40, "note: spaces and breaks"},
		{"x: ", "abcdefghijklmnopqrstuvwxyz end", 13, "x: abcdefghij\n   klmnopqrst\n   uvwxyz end"},
		{"x: ", "before abcdefghijklmnopqrst", 13, "x: before\n   abcdefghij\n   klmnopqrst"},
	}
	for _, tt := range tests {
		got := fill(tt.head, tt.text, tt.width)
		if got != tt.want {
			t.Errorf("fill(%q, %q, %d) =\n%s\nwant\n%s", tt.head, tt.text, tt.width, got, tt.want)
		}
		if long := longLines(got, tt.width); len(long) > 0 {
			t.Errorf("fill(%q, %q, %d): lines too wide: %q", tt.head, tt.text, tt.width, long)
		}
	}
}

// A diff line too long for plan's screen goes on over the next lines, each
// piece after the line's own "+ ", all but the last ending in a backslash;
// the pieces put together are the line.
func TestLongDiffLinesGoOnOverTheNextLines(t *testing.T) {
	long := "image: nats@sha256:" + strings.Repeat("0123456789abcdef", 12)
	diff := "  metadata:\n- " + long + "\n+ short\n"
	out := indent(diff, "    ")
	if l := longLines(out, planWidth); len(l) > 0 {
		t.Fatalf("lines wider than %d: %q", planWidth, l)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if lines[0] != "      metadata:" || lines[len(lines)-1] != "    + short" {
		t.Errorf("short lines changed:\n%s", out)
	}
	var joined string
	pieces := lines[1 : len(lines)-1]
	if len(pieces) < 2 {
		t.Fatalf("the long line was not broken:\n%s", out)
	}
	for i, p := range pieces {
		if !strings.HasPrefix(p, "    - ") {
			t.Errorf("piece %d does not go on after \"    - \": %q", i, p)
		}
		p = strings.TrimPrefix(p, "    - ")
		if i < len(pieces)-1 {
			if !strings.HasSuffix(p, `\`) {
				t.Errorf("piece %d does not end in a backslash: %q", i, p)
			}
			p = strings.TrimSuffix(p, `\`)
		}
		joined += p
	}
	if joined != long {
		t.Errorf("the pieces make\n%s\nwant\n%s", joined, long)
	}
}

// status's screen fits in 80 columns with every field long: the condition
// and hold messages, a server's start problem, gateways and leaf hubs, the
// gate, the restart reason and the Events; the prose is all there.
func TestStatusFitsInEightyColumns(t *testing.T) {
	long := "the quick brown fox jumps over the lazy dog and keeps running along the river bank until the sun goes down behind the hills"
	now := time.Now()
	since := metav1.NewTime(now.Add(-42 * time.Second))
	v := &StatusView{
		Cluster: "a-namespace/demo", Version: "2.15.2", Revision: "0ce3c135e7",
		Conditions: []metav1.Condition{
			{Type: clusterv1beta1.ConditionReady, Status: metav1.ConditionFalse, Reason: "ServersNotReady", Message: long},
			{Type: clusterv1beta1.ConditionSettled, Status: metav1.ConditionTrue, Reason: "AllGroupsCurrent", Message: long},
			{Type: clusterv1beta1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: clusterv1beta1.ReasonAuthChangeBlocked, Message: long},
		},
		Paused: true,
		Annots: map[string]string{clusterv1beta1.AnnotationRestartAll: clusterv1beta1.RestartAllResetJetStream, clusterv1beta1.AnnotationForceStep: "demo-1"},
		Servers: []ServerView{{
			Name: "demo-0", Ready: true, Version: "2.15.2", Revision: "0ce3c135e7", Answered: true,
			CatchingUp:   []string{"stream ACCOUNTWITHAVERYLONGNKEYNAMEOFFIFTYSIXCHARACTERSXXXXXXXXXXXXXXX/ORDERS lag 123456"},
			StartProblem: long,
			Gateways:     []string{"north-cluster", "south-cluster", "east-cluster", "west-cluster", "central-cluster", "another-cluster"},
			Leafnodes:    []string{"hub-0.hub.nats.svc", "hub-1.hub.nats.svc", "hub-2.hub.nats.svc", "hub-3.hub.nats.svc"},
		}},
		Rollout: &clusterv1beta1.RolloutStatus{TargetRevision: "0ce3c135e7", Updated: []string{"demo-2"}, Current: "demo-1", Pending: []string{"demo-0"},
			Gate: &clusterv1beta1.Gate{WaitingFor: long, Since: &since}, RestartReason: long},
		Events: []EventView{{Last: now.Add(-time.Minute), Type: "Warning", Reason: "AuthChangeBlocked", Message: long}},
	}
	var out bytes.Buffer
	printStatus(&out, v, now)
	if l := longLines(out.String(), statusWidth); len(l) > 0 {
		t.Errorf("lines wider than %d columns:\n%s\n\nthe screen:\n%s", statusWidth, strings.Join(l, "\n"), out.String())
	}
	screen := words(out.String())
	for _, want := range []string{
		"Ready False ServersNotReady: " + long, "Progressing False AuthChangeBlocked: " + long,
		"cannot start: " + long, "gate waiting for " + long + " since", "restarts " + long,
		"gateways to: north-cluster, south-cluster, east-cluster, west-cluster, central-cluster, another-cluster",
		"leaf of: hub-0.hub.nats.svc, hub-1.hub.nats.svc, hub-2.hub.nats.svc, hub-3.hub.nats.svc",
		"held AuthChangeBlocked " + long, "paused spec.rollout.paused",
		"annotation " + clusterv1beta1.AnnotationForceStep + "=demo-1 annotation " + clusterv1beta1.AnnotationRestartAll + "=" + clusterv1beta1.RestartAllResetJetStream,
	} {
		if !strings.Contains(screen, words(want)) {
			t.Errorf("the screen lacks %q:\n%s", want, out.String())
		}
	}
	if !strings.Contains(out.String(), " 1 group\n") {
		t.Errorf("a server catching up on one group does not say \"1 group\":\n%s", out.String())
	}
	if !strings.Contains(out.String(), "...\n") {
		t.Errorf("the long Event's line is not cut:\n%s", out.String())
	}
	t.Logf("kubectl nats status, every field long:\n%s", out.String())
}

// version prints internal/version's line, without a kubeconfig or a
// cluster, and -o json and -o yaml parse back into version.Info.
func TestVersionNeedsNoCluster(t *testing.T) {
	out, code := run(t, "version")
	if want := version.Get().String() + "\n"; code != ExitOK || out != want {
		t.Errorf("version: exit %d, %q; want exit 0, %q", code, out, want)
	}
	for _, o := range []string{"json", "yaml"} {
		out, code := run(t, "version", "-o", o)
		var got version.Info
		if err := yaml.UnmarshalStrict([]byte(out), &got); err != nil || code != ExitOK {
			t.Fatalf("version -o %s: exit %d, %v:\n%s", o, code, err, out)
		}
		if got != version.Get() || got.Version == "" || got.GoVersion == "" {
			t.Errorf("version -o %s: %+v, want %+v", o, got, version.Get())
		}
	}
	if out, code := run(t, "version", "-o", "xml"); code != ExitError || !strings.Contains(out, "want json or yaml") {
		t.Errorf("version -o xml: exit %d, %q; want exit 1 naming json and yaml", code, out)
	}
}
