// Command testreport reads the output of `go test -json` on its standard
// input and prints what plain `go test` would print: each package's ok or
// FAIL line with its time, the complete output of every failed test
// (nested subtests included, the output of passed tests left out, as go test
// does without -v), every package's own output when it fails (a panic, a
// timeout, TestMain's words), and build failures. It keeps the JSON it read
// in a file, so the run can be looked at again, and ends with the slowest
// tests and each package's time. It exits 1 when a test, a package or a
// build failed, or when a package started and never finished (go test was
// killed): a pipeline `go test -json ... | testreport` fails as go test
// would.
//
//	go test -json ./... | go run ./hack/testreport [-json FILE] [-summary=false]
//	go run ./hack/testreport -summarize FILE...
//
// -json names the file the JSON is written to (default: a new file in the
// temporary directory; its path is printed). -summary=false leaves out the
// closing summary, for a caller that prints one over several runs with
// -summarize, which reads recorded JSON files and prints the summary over
// all of them (the failures first) instead of reading standard input.
//
// The slowest list counts top-level tests only: a subtest's time is part of
// its parent's, so listing both would count it twice, and a table test's
// cases are seen through the test that runs them. A test's time takes in
// its parallel subtests, which the time go test reports for it leaves out (a
// table of parallel cases reads 0.1s however long its cases take): it is the
// longest of go test's own time for it, the time of its slowest subtest (so
// counted), and the time between its start (for a parallel test, when it was
// let go on) and its result as the events are stamped (go test stamps the
// events of a package whose output it holds back when they reach it, not
// when the test said them, so this one alone can fall short).
//
// It uses the standard library only, so it runs with nothing but Go.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json, plus the go
// command's build-output and build-fail events, which carry ImportPath).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string
	FailedBuild string
}

// testRun is one test as far as the stream has gone.
type testRun struct {
	header  string   // its "--- FAIL: ..." line
	body    []string // its output, and the blocks of its failed subtests
	done    bool
	started time.Time // its last run or cont event
	// slowestSub is the time of its slowest subtest, as counted here.
	slowestSub float64
}

// pkgRun is one package as far as the stream has gone.
type pkgRun struct {
	tests map[string]*testRun
	order []string // tests in the order they started
	// failed is the output of its failed tests, printed with its FAIL
	// line: go test -json interleaves packages that run at once, plain go
	// test prints each package's output together.
	failed []string
	own    []string // output outside any test
	done   bool
}

// result is what the summary needs of a finished test or package.
type result struct {
	Package, Test string
	Action        string
	Elapsed       float64
	// Build: the package's test binary did not build.
	Build bool
}

// report follows a stream and prints as it goes.
type report struct {
	out      io.Writer
	pkgs     map[string]*pkgRun
	pkgOrder []string
	// tests are the finished top-level tests, packages the finished
	// packages (not those with no test files), failed the failed
	// top-level tests and packages.
	tests, packages, failed []result
	// buildFailed are the builds that failed (by ImportPath) and no
	// package's failure names.
	buildFailed map[string]bool
	failure     bool
}

func newReport(out io.Writer) *report {
	return &report{out: out, pkgs: map[string]*pkgRun{}, buildFailed: map[string]bool{}}
}

func (r *report) pkg(name string) *pkgRun {
	p, ok := r.pkgs[name]
	if !ok {
		p = &pkgRun{tests: map[string]*testRun{}}
		r.pkgs[name] = p
		r.pkgOrder = append(r.pkgOrder, name)
	}
	return p
}

// line handles one line of input: an event, or anything else (printed as
// it is: go test prints some errors before any JSON).
func (r *report) line(raw []byte) {
	var e event
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &e) != nil {
		fmt.Fprintln(r.out, string(raw))
		return
	}
	switch e.Action {
	case "build-output":
		// The compiler's and vet's words, as go test prints them at once.
		fmt.Fprint(r.out, e.Output)
		return
	case "build-fail":
		r.buildFailed[e.ImportPath] = true
		r.failure = true
		return
	}
	if e.Package == "" {
		if e.Output != "" {
			fmt.Fprint(r.out, e.Output)
		}
		return
	}
	p := r.pkg(e.Package)
	if e.Test == "" {
		r.packageEvent(p, e)
		return
	}
	t, ok := p.tests[e.Test]
	if !ok {
		t = &testRun{}
		p.tests[e.Test] = t
		p.order = append(p.order, e.Test)
	}
	switch e.Action {
	case "run", "cont":
		t.started = e.Time
	case "output":
		if t.done {
			p.own = append(p.own, strings.TrimSuffix(e.Output, "\n"))
			return
		}
		text := strings.TrimRight(e.Output, "\n")
		trimmed := strings.TrimLeft(text, " ")
		switch {
		case strings.HasPrefix(trimmed, "=== RUN ") || strings.HasPrefix(trimmed, "=== PAUSE ") ||
			strings.HasPrefix(trimmed, "=== CONT ") || strings.HasPrefix(trimmed, "=== NAME "):
			// -v's framing, which plain go test does not print.
		case strings.HasPrefix(trimmed, "--- FAIL: "+e.Test+" ") || strings.HasPrefix(trimmed, "--- PASS: "+e.Test+" ") ||
			strings.HasPrefix(trimmed, "--- SKIP: "+e.Test+" "):
			t.header = trimmed
		default:
			t.body = append(t.body, strings.TrimSuffix(e.Output, "\n"))
		}
	case "pass", "skip", "fail":
		t.done = true
		if e.Action == "fail" {
			if t.header == "" {
				t.header = fmt.Sprintf("--- FAIL: %s (%.2fs)", e.Test, e.Elapsed)
			}
			block := append([]string{t.header}, t.body...)
			if parent, ok := p.tests[parentOf(e.Test)]; ok && parentOf(e.Test) != "" && !parent.done {
				for _, l := range block {
					parent.body = append(parent.body, "    "+l)
				}
			} else {
				p.failed = append(p.failed, block...)
			}
		}
		t.body = nil
		elapsed := max(e.Elapsed, t.slowestSub)
		if !t.started.IsZero() && !e.Time.IsZero() {
			elapsed = max(elapsed, e.Time.Sub(t.started).Seconds())
		}
		if parent, ok := p.tests[parentOf(e.Test)]; ok {
			parent.slowestSub = max(parent.slowestSub, elapsed)
		}
		if !strings.Contains(e.Test, "/") {
			res := result{Package: e.Package, Test: e.Test, Action: e.Action, Elapsed: elapsed}
			r.tests = append(r.tests, res)
			if e.Action == "fail" {
				r.failed = append(r.failed, res)
				r.failure = true
			}
		}
	}
}

// parentOf is the test a subtest runs in ("" for a top-level test).
func parentOf(test string) string {
	if i := strings.LastIndex(test, "/"); i >= 0 {
		return test[:i]
	}
	return ""
}

// packageEvent handles an event of the package itself.
func (r *report) packageEvent(p *pkgRun, e event) {
	switch e.Action {
	case "output":
		p.own = append(p.own, strings.TrimSuffix(e.Output, "\n"))
	case "pass", "skip":
		p.done = true
		summary := false
		for _, l := range p.own {
			// The go command's line: "ok  \tpkg\t1.2s" or "?   \tpkg\t[no test files]".
			if strings.HasPrefix(l, "ok  ") || strings.HasPrefix(l, "?   ") {
				fmt.Fprintln(r.out, l)
				summary = true
			}
		}
		if !summary {
			fmt.Fprintf(r.out, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
		}
		if !strings.Contains(strings.Join(p.own, "\n"), "[no test files]") {
			r.packages = append(r.packages, result{Package: e.Package, Action: e.Action, Elapsed: e.Elapsed})
		}
		p.own = nil
	case "fail":
		p.done = true
		r.failure = true
		r.printLines(p.failed)
		r.unfinished(e.Package, p)
		for _, l := range p.own {
			fmt.Fprintln(r.out, l)
		}
		if e.FailedBuild != "" {
			delete(r.buildFailed, e.FailedBuild)
		}
		res := result{Package: e.Package, Action: "fail", Elapsed: e.Elapsed, Build: e.FailedBuild != ""}
		r.packages = append(r.packages, res)
		r.failed = append(r.failed, res)
		p.own = nil
	}
}

func (r *report) printLines(lines []string) {
	for _, l := range lines {
		fmt.Fprintln(r.out, l)
	}
}

// unfinished prints the output of the tests of a package that never
// finished (the binary panicked, timed out or was killed while they ran):
// what they said is the story of the failure.
func (r *report) unfinished(pkg string, p *pkgRun) {
	for _, name := range p.order {
		t := p.tests[name]
		if t.done {
			continue
		}
		t.done = true
		fmt.Fprintf(r.out, "--- FAIL: %s (unfinished)\n", name)
		for _, l := range t.body {
			fmt.Fprintln(r.out, l)
		}
		if !strings.Contains(name, "/") {
			res := result{Package: pkg, Test: name, Action: "fail"}
			r.tests = append(r.tests, res)
			r.failed = append(r.failed, res)
		}
	}
}

// finish closes the stream: a package that started and never finished is
// a failure (go test was killed or its output cut short).
func (r *report) finish() {
	for _, name := range r.pkgOrder {
		p := r.pkgs[name]
		if p.done {
			continue
		}
		r.printLines(p.failed)
		r.unfinished(name, p)
		r.printLines(p.own)
		fmt.Fprintf(r.out, "FAIL\t%s\t(no result: the stream ended before the package finished)\n", name)
		res := result{Package: name, Action: "fail"}
		r.packages = append(r.packages, res)
		r.failed = append(r.failed, res)
		r.failure = true
	}
}

// summary prints the failures, the slowest top-level tests and every
// package's time.
func (r *report) summary(slowest int) {
	w := r.out
	fmt.Fprintln(w)
	if len(r.failed) > 0 || len(r.buildFailed) > 0 {
		fmt.Fprintln(w, "== failed")
		var builds []string
		for b := range r.buildFailed {
			builds = append(builds, b)
		}
		sort.Strings(builds)
		for _, b := range builds {
			fmt.Fprintf(w, "  build  %s\n", b)
		}
		for _, f := range r.failed {
			switch {
			case f.Build:
				fmt.Fprintf(w, "  package  %s  [build failed]\n", f.Package)
			case f.Test == "":
				fmt.Fprintf(w, "  package  %s\n", f.Package)
			default:
				fmt.Fprintf(w, "  test  %s  %s\n", f.Package, f.Test)
			}
		}
	}
	tests := append([]result(nil), r.tests...)
	sort.SliceStable(tests, func(i, j int) bool { return slower(tests[i], tests[j]) })
	if len(tests) > slowest {
		tests = tests[:slowest]
	}
	fmt.Fprintf(w, "== the %d slowest tests (top-level tests; a subtest's time is its parent's)\n", len(tests))
	for _, t := range tests {
		mark := ""
		if t.Action == "fail" {
			mark = "  FAIL"
		}
		fmt.Fprintf(w, "%9.2fs  %s  %s%s\n", t.Elapsed, t.Package, t.Test, mark)
	}
	pkgs := append([]result(nil), r.packages...)
	sort.SliceStable(pkgs, func(i, j int) bool { return slower(pkgs[i], pkgs[j]) })
	total := 0.0
	for _, p := range pkgs {
		total += p.Elapsed
	}
	fmt.Fprintf(w, "== %d packages with tests, slowest first (%.1fs together; they run in parallel)\n", len(pkgs), total)
	for _, p := range pkgs {
		mark := ""
		if p.Action == "fail" {
			mark = "  FAIL"
		}
		fmt.Fprintf(w, "%9.2fs  %s%s\n", p.Elapsed, p.Package, mark)
	}
}

// slower orders results by time, the slowest first, then by name.
func slower(a, b result) bool {
	if a.Elapsed != b.Elapsed {
		return a.Elapsed > b.Elapsed
	}
	if a.Package != b.Package {
		return a.Package < b.Package
	}
	return a.Test < b.Test
}

// read feeds every line of in to the report.
func (r *report) read(in io.Reader, copyTo io.Writer) error {
	sc := bufio.NewScanner(in)
	// Test output lines can be long (a JSON dump, a goroutine trace).
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		if copyTo != nil {
			if _, err := copyTo.Write(append(sc.Bytes(), '\n')); err != nil {
				return err
			}
		}
		r.line(sc.Bytes())
	}
	return sc.Err()
}

func main() {
	jsonOut := flag.String("json", "", "write the JSON read to this file (default: a new file in the temporary directory)")
	withSummary := flag.Bool("summary", true, "end with the failures, the slowest tests and every package's time")
	summarize := flag.Bool("summarize", false, "print the summary of the recorded JSON files named as arguments, reading no standard input")
	slowest := flag.Int("slowest", 10, "how many of the slowest tests the summary lists")
	flag.Parse()
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr, *jsonOut, *withSummary, *summarize, *slowest, flag.Args()))
}

func run(stdin io.Reader, stdout, stderr io.Writer, jsonOut string, withSummary, summarize bool, slowest int, files []string) int {
	if summarize {
		// Only the summary: the runs' output was printed as they ran.
		r := newReport(io.Discard)
		for _, name := range files {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintf(stderr, "testreport: %v\n", err)
				return 2
			}
			err = r.read(f, nil)
			f.Close()
			if err != nil {
				fmt.Fprintf(stderr, "testreport: %s: %v\n", name, err)
				return 2
			}
		}
		r.finish()
		r.out = stdout
		r.summary(slowest)
		if r.failure {
			return 1
		}
		return 0
	}
	var f *os.File
	var err error
	if jsonOut == "" {
		f, err = os.CreateTemp("", "go-test-*.json")
	} else {
		f, err = os.Create(jsonOut)
	}
	if err != nil {
		fmt.Fprintf(stderr, "testreport: %v\n", err)
		return 2
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	r := newReport(stdout)
	readErr := r.read(stdin, w)
	r.finish()
	if err := w.Flush(); err != nil {
		fmt.Fprintf(stderr, "testreport: writing %s: %v\n", f.Name(), err)
		return 2
	}
	if readErr != nil {
		fmt.Fprintf(stderr, "testreport: reading go test's output: %v\n", readErr)
		return 2
	}
	if withSummary {
		r.summary(slowest)
		fmt.Fprintf(stdout, "(go test -json output: %s)\n", f.Name())
	}
	if r.failure {
		return 1
	}
	return 0
}
