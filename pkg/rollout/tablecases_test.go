package rollout

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"testing"
)

// writeTableCases records every case of the planner's table tests (their
// Input and the Decision Plan made) in testdata/table_cases.json, which
// pkg/kubectlnats' tests replay: plan must say of each exactly what
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
		checkRecorded(t, in)
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

var recorded struct {
	once   sync.Once
	byName map[string]json.RawMessage
	err    error
}

// checkRecorded fails a case that testdata/table_cases.json does not hold
// with this very input, so the replay in pkg/kubectlnats covers every
// case of every table as it is now.
func checkRecorded(t *testing.T, in Input) {
	t.Helper()
	recorded.once.Do(func() {
		b, err := os.ReadFile(filepath.Join("testdata", "table_cases.json"))
		if err != nil {
			recorded.err = err
			return
		}
		var cases []struct {
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if recorded.err = json.Unmarshal(b, &cases); recorded.err != nil {
			return
		}
		recorded.byName = map[string]json.RawMessage{}
		for _, c := range cases {
			recorded.byName[c.Name] = c.Input
		}
	})
	if recorded.err != nil {
		t.Fatalf("reading the recorded table cases: %v", recorded.err)
	}
	const again = "record the cases again: go test ./pkg/rollout -write-table-cases"
	rec, ok := recorded.byName[t.Name()]
	if !ok {
		t.Fatalf("case %s is not in testdata/table_cases.json: %s", t.Name(), again)
	}
	var want, got any
	cur, _ := json.Marshal(in)
	if json.Unmarshal(rec, &want) != nil || json.Unmarshal(cur, &got) != nil || !reflect.DeepEqual(want, got) {
		t.Fatalf("case %s changed since testdata/table_cases.json was recorded: %s", t.Name(), again)
	}
}
