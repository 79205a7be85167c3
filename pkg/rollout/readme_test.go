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

// changeTable renders, for every change kind, how the controller applies it
// without auth, in operator mode on a full or cache resolver, and on the
// memory resolver, from the effects table the route-compatibility and
// reload matrices prove.
func changeTable() string {
	var b strings.Builder
	b.WriteString("| Change | Without auth | With auth, Full or Cache resolver | With auth, Memory resolver | JetStream |\n|---|---|---|---|---|\n")
	restart := "restarted one server at a time, behind the gate (`" + clusterv1beta1.ReasonRollingRestart + "`)"
	reload := "reloaded one server at a time, behind the gate (`" + clusterv1beta1.ReasonReloading + "`)"
	how := func(r bool) string {
		if r {
			return reload
		}
		return restart
	}
	// Kinds that exist only in operator mode, and only without it.
	withAuthOnly := map[ChangeKind]bool{ChangeOperator: true, ChangeSystemAccount: true, ChangeAccounts: true, ChangeResolver: true}
	withoutAuthOnly := map[ChangeKind]bool{ChangeSystemUser: true, ChangeSystemUserNKey: true}
	for _, k := range ChangeKinds() {
		e := EffectOf(k)
		none, full, mem := how(e.Reloads || e.ReloadsWithoutAuth), how(e.Reloads), how(e.Reloads || e.ReloadsWithMemoryResolver)
		if e.Splits {
			reason := e.HoldReason
			if reason == "" {
				reason = clusterv1beta1.ReasonUnsupportedChange
			}
			none = fmt.Sprintf("held (`%s`): %s; `%s` restarts every server together", reason, e.Why, clusterv1beta1.AnnotationRestartAll)
			if k == ChangeGateway {
				// ownMetaGroup comes first wherever JetStream runs.
				none = fmt.Sprintf("with JetStream held (`%s`), which nothing but going back releases (see Superclusters); without, %s",
					clusterv1beta1.ReasonOwnMetaGroup, none)
			}
			full, mem = "the same", "the same"
			if withAuthOnly[k] {
				full = none
			}
		}
		if withAuthOnly[k] {
			none = "(no such change)"
		}
		if withoutAuthOnly[k] {
			full, mem = "(no such change)", "(no such change)"
		}
		js := "kept"
		if e.ResetsJetStream {
			js = fmt.Sprintf("starts empty (streams stay on the volumes, unreachable): `%s=%s` is needed when streams exist",
				clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllResetJetStream)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", e.What, none, full, mem, js)
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
