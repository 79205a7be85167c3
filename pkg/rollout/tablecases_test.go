package rollout

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
)

// writeTableCases records every case of the planner's table tests (their
// Input and the Decision Plan made) in testdata/table_cases.json, which
// internal/kubectlnats' tests replay: plan must say of each exactly what
// the planner decided. Run go test ./pkg/rollout -run 'TestPlan|Test.*' -write-table-cases
// after changing a table.
var writeTableCases = flag.Bool("write-table-cases", false, "write testdata/table_cases.json")

// TableCase is one recorded case.
type TableCase struct {
	Name     string   `json:"name"`
	Input    Input    `json:"input"`
	Decision Decision `json:"decision"`
}

var tableCases struct {
	sync.Mutex
	byName map[string]TableCase
}

// tableCase is Plan for a table test's case, recorded with
// -write-table-cases.
func tableCase(t *testing.T, in Input) Decision {
	d := Plan(in)
	if !*writeTableCases {
		return d
	}
	tableCases.Lock()
	defer tableCases.Unlock()
	if tableCases.byName == nil {
		tableCases.byName = map[string]TableCase{}
	}
	tableCases.byName[t.Name()] = TableCase{Name: t.Name(), Input: in, Decision: d}
	var all []TableCase
	for _, c := range tableCases.byName {
		all = append(all, c)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	b, err := json.MarshalIndent(all, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "table_cases.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}
