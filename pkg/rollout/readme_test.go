package rollout

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite the table of changes in README.md from the effects table")

const (
	readmePath       = "../../README.md"
	changeTableStart = "<!-- BEGIN change table: generated from pkg/rollout/changes.go by go test ./pkg/rollout -run TestREADMEChangeTable -update-readme -->"
	changeTableEnd   = "<!-- END change table -->"
)

// changeTable renders, for every change kind, how the controller applies it,
// from the effects table the route-compatibility and reload matrices prove.
func changeTable() string {
	var b strings.Builder
	b.WriteString("| Change | Applied by | Progressing reads | JetStream |\n|---|---|---|---|\n")
	const restart, reload = "restarting one server at a time, each behind the gate", "reloading one server at a time, each behind the gate"
	for _, k := range ChangeKinds() {
		e := EffectOf(k)
		how, reads := restart, "`"+clusterv1beta1.ReasonRollingRestart+"`"
		switch {
		case e.Reloads:
			how, reads = reload, "`"+clusterv1beta1.ReasonReloading+"`"
		case e.ReloadsWithoutAuth:
			how = "without spec.auth " + reload + "; with auth " + restart
			reads = fmt.Sprintf("`%s` without auth, `%s` with", clusterv1beta1.ReasonReloading, clusterv1beta1.ReasonRollingRestart)
		case e.Splits:
			reason := e.HoldReason
			if reason == "" {
				reason = clusterv1beta1.ReasonUnsupportedChange
			}
			how = fmt.Sprintf("held: %s; `%s` restarts every server together", e.Why, clusterv1beta1.AnnotationRestartAll)
			reads = "`" + reason + "`"
		}
		js := "kept"
		if e.ResetsJetStream {
			js = fmt.Sprintf("starts empty (streams stay on the volumes, unreachable): `%s=%s` is needed when streams exist",
				clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllResetJetStream)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", e.What, how, reads, js)
	}
	return b.String()
}

// TestREADMEChangeTable keeps the README's table of what each change does
// equal to the effects table, so the README cannot claim a change reloads or
// rolls when the matrices say otherwise.
func TestREADMEChangeTable(t *testing.T) {
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	i, j := strings.Index(readme, changeTableStart), strings.Index(readme, changeTableEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md has no change table between %q and %q", changeTableStart, changeTableEnd)
	}
	want := changeTable()
	got := readme[i+len(changeTableStart)+1 : j]
	if got == want {
		return
	}
	if *updateREADME {
		readme = readme[:i+len(changeTableStart)+1] + want + readme[j:]
		if err := os.WriteFile(readmePath, []byte(readme), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's change table differs from changes.go; run go test ./pkg/rollout -run TestREADMEChangeTable -update-readme\ngot:\n%s\nwant:\n%s", got, want)
}

// TestREADMENamesEveryHold: every hold that needs the user (Notifies) and
// that a table case of the planner reaches is listed in the README's
// section "What the controller will never do without being told".
func TestREADMENamesEveryHold(t *testing.T) {
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	const heading = "## What the controller will never do without being told"
	readme := string(raw)
	i := strings.Index(readme, heading)
	if i < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	section := readme[i+len(heading):]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	b, err := os.ReadFile(filepath.Join("testdata", "table_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []TableCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, c := range cases {
		if h := c.Decision.Hold; h != nil && h.Notify {
			reasons[h.Reason] = true
		}
	}
	if len(reasons) < 5 {
		t.Fatalf("the table cases reach %d holds; the check would prove little", len(reasons))
	}
	for r := range reasons {
		if !strings.Contains(section, "`"+r+"`") {
			t.Errorf("the README's %q does not list the hold %s", heading, r)
		}
	}
}
