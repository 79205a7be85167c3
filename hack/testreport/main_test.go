package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/go-test.json is `go test -count=1 -json ./...` of the module in
// testdata/sample, recorded with go 1.26: a package that passes (a test with
// a log line, a table of parallel subtests, a skipped test), one that fails
// (a test with output, a failing subtest beside a passing one), one whose
// test binary does not build, and one with no test files. Record it again
// with
//
//	cd hack/testreport/testdata/sample && go test -count=1 -json ./... > ../go-test.json

func sample(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "go-test.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lines keeps the lines of a stream that contain sub.
func lines(b []byte, sub string) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if bytes.Contains(l, []byte(sub)) {
			out = append(out, l...)
		}
	}
	return out
}

func runOn(t *testing.T, in []byte, summary bool) (string, int, string) {
	t.Helper()
	jsonOut := filepath.Join(t.TempDir(), "out.json")
	var stdout, stderr bytes.Buffer
	code := run(bytes.NewReader(in), &stdout, &stderr, jsonOut, summary, false, 10, nil)
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
	kept, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kept, in) {
		t.Errorf("the JSON file differs from the input:\n%s", kept)
	}
	return stdout.String(), code, jsonOut
}

func wantInOrder(t *testing.T, out string, want ...string) {
	t.Helper()
	rest := out
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Errorf("output lacks %q (or has it out of order):\n%s", w, out)
			return
		}
		rest = rest[i+len(w):]
	}
}

// section is out from the line title to the next "== " line.
func section(t *testing.T, out, title string) string {
	t.Helper()
	i := strings.Index(out, title)
	if i < 0 {
		t.Fatalf("output has no %q:\n%s", title, out)
	}
	s := out[i:]
	if j := strings.Index(s[len(title):], "\n== "); j >= 0 {
		s = s[:len(title)+j+1]
	}
	return s
}

func wantNot(t *testing.T, out string, not ...string) {
	t.Helper()
	for _, n := range not {
		if strings.Contains(out, n) {
			t.Errorf("output has %q:\n%s", n, out)
		}
	}
}

func TestSampleWithFailures(t *testing.T) {
	out, code, jsonOut := runOn(t, sample(t), true)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	// The build failure, as the go command prints it.
	wantInOrder(t, out,
		"# example.com/sample/broken [example.com/sample/broken.test]\n",
		"broken/broken.go:3:28: undefined: undefinedName\n",
		"FAIL\texample.com/sample/broken [build failed]\n")
	// The failed tests in full, nested, then the package's FAIL line.
	wantInOrder(t, out,
		"--- FAIL: TestFails (0.00s)\n",
		"    bad_test.go:9: before the failure\n",
		"    bad_test.go:10: got 1, want 2\n",
		"--- FAIL: TestSubtestFails (0.00s)\n",
		"    --- FAIL: TestSubtestFails/fails (0.00s)\n",
		"    printed to stdout by the subtest\n",
		"        bad_test.go:17: the subtest fails\n",
		"FAIL\n",
		"FAIL\texample.com/sample/bad\t")
	wantInOrder(t, out, "ok  \texample.com/sample/good\t")
	wantInOrder(t, out, "?   \texample.com/sample/notests\t[no test files]\n")
	// What plain go test leaves out: passed tests' output, -v's framing.
	wantNot(t, out, "hidden: a passing subtest", "a log line of a passing test", "=== RUN", "=== PAUSE", "=== CONT",
		"--- PASS", "--- SKIP", "not here")
	// The summary.
	failed := section(t, out, "== failed\n")
	for _, f := range []string{
		"  package  example.com/sample/broken  [build failed]\n",
		"  test  example.com/sample/bad  TestFails\n",
		"  test  example.com/sample/bad  TestSubtestFails\n",
		"  package  example.com/sample/bad\n",
	} {
		wantInOrder(t, failed, f)
	}
	if n := strings.Count(failed, "\n"); n != 5 {
		t.Errorf("the failed section has %d lines, want 5 (its title and 4 failures):\n%s", n, failed)
	}
	wantInOrder(t, out,
		"== failed\n",
		"== the 6 slowest tests",
		"s  example.com/sample/good  TestPasses\n",
		"== 3 packages with tests, slowest first",
		"s  example.com/sample/good\n",
		"(go test -json output: "+jsonOut+")\n")
	// A table of parallel subtests takes their time (30 ms each, at once),
	// which go test's own Elapsed for it (0) leaves out.
	slow := section(t, out, "== the 6 slowest tests")
	if i := strings.Index(slow, "s  example.com/sample/good  TestTable\n"); i < 0 || strings.HasSuffix(slow[:i], "0.00") {
		t.Errorf("TestTable is not listed with its parallel subtests' time:\n%s", slow)
	}
	// Subtests are not in the slowest list; failed tests are marked.
	wantNot(t, out, "TestTable/one", "TestSubtestFails/fails  FAIL")
	wantInOrder(t, out, "example.com/sample/bad  TestSubtestFails  FAIL\n")
}

func TestPassingRunExitsZero(t *testing.T) {
	in := append(lines(sample(t), `"Package":"example.com/sample/good"`), lines(sample(t), `"Package":"example.com/sample/notests"`)...)
	out, code, _ := runOn(t, in, false)
	if code != 0 {
		t.Errorf("exit code %d, want 0:\n%s", code, out)
	}
	want := "?   \texample.com/sample/notests\t[no test files]\n"
	if !strings.HasPrefix(out, "ok  \texample.com/sample/good\t") || !strings.HasSuffix(out, want) || strings.Count(out, "\n") != 2 {
		t.Errorf("output is not exactly the ok line and the no-test-files line:\n%s", out)
	}
}

func TestBuildFailureAloneFails(t *testing.T) {
	_, code, _ := runOn(t, lines(sample(t), "example.com/sample/broken"), false)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	// A build-fail with no package event after it (go vet, or a cut
	// stream) still fails and is named.
	var stdout bytes.Buffer
	in := lines(lines(sample(t), "example.com/sample/broken"), `"build-`)
	if code := run(bytes.NewReader(in), &stdout, &stdout, filepath.Join(t.TempDir(), "x.json"), true, false, 10, nil); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	wantInOrder(t, stdout.String(), "== failed\n", "  build  example.com/sample/broken [example.com/sample/broken.test]\n")
}

// A test binary that panics (or times out) leaves its running test without
// a result: its output and the package's are printed, and it counts as
// failed.
func TestPanicAndCutStream(t *testing.T) {
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestHangs"}
{"Action":"output","Package":"p","Test":"TestHangs","Output":"=== RUN   TestHangs\n"}
{"Action":"output","Package":"p","Test":"TestHangs","Output":"    hang_test.go:5: waiting\n"}
{"Action":"output","Package":"p","Test":"TestHangs","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1.005s\n"}
{"Action":"fail","Package":"p","Elapsed":1.005}
{"Action":"start","Package":"q"}
{"Action":"run","Package":"q","Test":"TestCut"}
{"Action":"output","Package":"q","Test":"TestCut","Output":"    cut_test.go:9: half a story\n"}
not json: printed as it is
`
	out, code, _ := runOn(t, []byte(in), true)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	wantInOrder(t, out,
		"--- FAIL: TestHangs (unfinished)\n", "    hang_test.go:5: waiting\n", "panic: test timed out after 1s\n", "FAIL\tp\t1.005s\n",
		"not json: printed as it is\n",
		"--- FAIL: TestCut (unfinished)\n", "    cut_test.go:9: half a story\n", "FAIL\tq\t(no result: the stream ended before the package finished)\n",
		"== failed\n", "  test  p  TestHangs\n", "  package  p\n", "  test  q  TestCut\n", "  package  q\n")
}

// -summarize reads several recorded runs and prints one summary over them.
func TestSummarize(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := os.WriteFile(a, lines(sample(t), `"Package":"example.com/sample/good"`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, lines(sample(t), `"Package":"example.com/sample/bad"`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(strings.NewReader("stdin is not read"), &stdout, &stderr, "", true, true, 2, []string{a, b}); code != 1 {
		t.Errorf("exit code %d, want 1 (b has failures)", code)
	}
	out := stdout.String()
	wantInOrder(t, out, "== failed\n", "  test  example.com/sample/bad  TestFails\n",
		"== the 2 slowest tests", "s  example.com/sample/good  TestPasses\n",
		"== 2 packages with tests")
	// Only the summary: the runs' output was printed when they ran.
	wantNot(t, out, "bad_test.go:10", "ok  \t", "stdin")
}

// go test -json interleaves the events of packages that run at once; a
// failed package's output is printed together, with its FAIL line.
func TestInterleavedPackages(t *testing.T) {
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:3: boom\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- FAIL: TestA (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0}
{"Action":"start","Package":"q"}
{"Action":"output","Package":"q","Output":"ok  \tq\t0.010s\n"}
{"Action":"pass","Package":"q","Elapsed":0.01}
{"Action":"output","Package":"p","Output":"FAIL\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.020s\n"}
{"Action":"fail","Package":"p","Elapsed":0.02}
`
	out, code, _ := runOn(t, []byte(in), false)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	want := "ok  \tq\t0.010s\n--- FAIL: TestA (0.00s)\n    a_test.go:3: boom\nFAIL\nFAIL\tp\t0.020s\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}
