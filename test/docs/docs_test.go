package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's top directory, seen from this package.
var root = filepath.Join("..", "..")

// markdownFiles are the files checked: README.md and every docs/*.md,
// relative to root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range more {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	// A Markdown link or image: [text](target) or [text](target "title").
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// A fenced code block.
	fenceRE = regexp.MustCompile("(?ms)^```.*?^```[^\n]*$")
	// A span in backticks (one line).
	codeRE = regexp.MustCompile("`([^`\n]+)`")
	// A word that may be a path, where text, a list or a code block names
	// one: it starts a line or follows a space or an opening bracket or
	// quote, and ends in a letter, digit or slash (so "doc.go." is doc.go).
	wordRE = regexp.MustCompile(`(?:^|[\s(\["'])((?:\.{1,2}/)*[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]*)*[A-Za-z0-9_/])`)
	// A Markdown file named alone, as DESIGN.md or STYLE.md.
	bareMarkdownRE = regexp.MustCompile(`^[A-Za-z0-9_-]+\.md$`)
	// A URL scheme, as in https: or mailto:.
	schemeRE = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
)

// topLevel are the names at the repository's top (files and directories,
// hidden ones aside): a path whose first element is one of them is a
// repository path.
func topLevel(t *testing.T) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names[e.Name()] = true
		}
	}
	return names
}

// repoPath says which repository path a word of file names, relative to
// root, and whether it names one at all: a path whose first element is a
// top-level name of the repository (pkg/..., hack/..., manifests/...,
// README.md), one going up from the file's directory (../...), or a
// Markdown file named alone, looked for beside the file. Commands, URLs,
// Kubernetes names (kubernetes.io/os) and placeholders are not paths.
func repoPath(file, word string, top map[string]bool) (string, bool) {
	word = strings.TrimPrefix(word, "./")
	dir := filepath.Dir(file)
	switch {
	case strings.HasPrefix(word, "../"):
		return filepath.ToSlash(filepath.Join(dir, word)), true
	case bareMarkdownRE.MatchString(word):
		if dir != "." {
			// Beside the file, else at the top (README.md named from docs/).
			return filepath.ToSlash(filepath.Join(dir, word)) + "|" + word, true
		}
		return word, true
	case strings.Contains(word, "/"):
		first := word[:strings.Index(word, "/")]
		if top[first] {
			return strings.TrimSuffix(word, "/"), true
		}
	}
	return "", false
}

// headingSlugs are the anchors GitHub makes of a Markdown file's headings:
// lower case, punctuation dropped, spaces as hyphens, a repeated one
// suffixed -1, -2, ...
func headingSlugs(text string) map[string]bool {
	slugs := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 127:
				b.WriteRune(r)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			slugs[slug+"-"+strconv.Itoa(n)] = true
		} else {
			slugs[slug] = true
		}
		seen[slug]++
	}
	return slugs
}

// brokenReferences returns, for one Markdown file (its path relative to
// root and its text), every repository path it names that does not exist
// and every link to a heading that is not there, and how many repository
// paths it names.
func brokenReferences(file, text string, top map[string]bool, exists func(string) bool, readFile func(string) (string, bool)) (broken []string, paths int) {
	seen := map[string]bool{}
	check := func(what, word string) {
		p, ok := repoPath(file, word, top)
		if !ok || seen[p] {
			return
		}
		seen[p] = true
		paths++
		found := false
		for _, alt := range strings.Split(p, "|") {
			found = found || (!strings.HasPrefix(alt, "../") && exists(alt))
		}
		if !found {
			broken = append(broken, what+": "+strings.ReplaceAll(p, "|", " or ")+" is not in the repository")
		}
	}
	// Links are read where Markdown makes them: not in code.
	prose := fenceRE.ReplaceAllString(text, "")
	prose = codeRE.ReplaceAllString(prose, "")
	for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
		target := m[1]
		if schemeRE.MatchString(target) {
			continue
		}
		path, frag, _ := strings.Cut(target, "#")
		p := file
		if path != "" {
			p = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
			paths++
			if strings.HasPrefix(p, "../") || !exists(p) {
				broken = append(broken, "link "+target+": "+p+" is not in the repository")
				continue
			}
		}
		if frag != "" && strings.HasSuffix(p, ".md") {
			if body, ok := readFile(p); ok && !headingSlugs(body)[frag] {
				broken = append(broken, "link "+target+": "+p+" has no heading #"+frag)
			}
		}
	}
	for _, m := range codeRE.FindAllStringSubmatch(text, -1) {
		fields := strings.Fields(m[1])
		if len(fields) > 0 {
			check("`"+m[1]+"`", fields[0])
		}
	}
	// Words outside links (their targets are checked above).
	for _, m := range wordRE.FindAllStringSubmatch(linkRE.ReplaceAllString(text, "]"), -1) {
		check("path "+m[1], m[1])
	}
	sort.Strings(broken)
	return broken, paths
}

// TestDocsNameOnlyPathsThatExist: every repository path README.md and
// docs/*.md name exists, and every link to a heading finds it.
func TestDocsNameOnlyPathsThatExist(t *testing.T) {
	top := topLevel(t)
	exists := func(rel string) bool {
		_, err := os.Stat(filepath.Join(root, rel))
		return err == nil
	}
	readFile := func(rel string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		return string(b), err == nil
	}
	files := markdownFiles(t)
	if len(files) < 3 {
		t.Errorf("checked %v; want README.md, docs/design.md and docs/api.md at least", files)
	}
	for _, f := range files {
		broken, paths := brokenReferences(f, read(t, f), top, exists, readFile)
		for _, b := range broken {
			t.Errorf("%s: %s", f, b)
		}
		if f != "docs/api.md" && paths < 10 {
			t.Errorf("%s names %d repository paths; the check would prove little", f, paths)
		}
	}
}

// TestBrokenReferencesFindsThem: the check above finds a missing file in
// each form it reads, a path out of the repository and a missing heading,
// and leaves commands, URLs, Kubernetes names and links in code alone.
func TestBrokenReferencesFindsThem(t *testing.T) {
	top := map[string]bool{"pkg": true, "hack": true, "docs": true, "README.md": true}
	have := map[string]bool{"pkg/rollout/gate.go": true, "hack/test.sh": true, "docs": true, "docs/design.md": true, "README.md": true, "pkg/render": true}
	exists := func(p string) bool { return have[p] }
	readFile := func(p string) (string, bool) {
		if p == "README.md" {
			return "# nats-operator\n## Reading the status\n", true
		}
		return "", false
	}
	text := strings.Join([]string{
		"See [the gate](../pkg/rollout/gate.go) and [status](../README.md#reading-the-status).",
		"Run `hack/test.sh matrix`, `go test ./pkg/render`, `kubectl apply -k manifests/`.",
		"Labels kubernetes.io/os and https://example.com/pkg/x.go are not paths.",
		"README.md named from docs/ is found at the top; code is no link: `[x](nothing.md)`.",
		"```yaml",
		"pattern: '[a](b.md)'",
		"```",
		"Missing: [design](DESIGN.md), `API.md`, `hack/nothing.sh`, pkg/rollout/nothing.go.",
		"Out of the repository: [shared](../../shared/x.md); a heading: [x](../README.md#no-such-heading).",
	}, "\n")
	got, _ := brokenReferences("docs/design.md", text, top, exists, readFile)
	want := []string{
		"`API.md`: docs/API.md or API.md is not in the repository",
		"`hack/nothing.sh`: hack/nothing.sh is not in the repository",
		"link ../../shared/x.md: ../shared/x.md is not in the repository",
		"link ../README.md#no-such-heading: README.md has no heading #no-such-heading",
		"link DESIGN.md: docs/DESIGN.md is not in the repository",
		"path pkg/rollout/nothing.go: pkg/rollout/nothing.go is not in the repository",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// section returns the text of README.md's section under heading, up to
// the next heading of the same or a higher level (lines starting with #
// inside code blocks are not headings).
func section(t *testing.T, readme, heading string) string {
	t.Helper()
	level := strings.Index(heading, " ")
	lines := strings.Split(readme, "\n")
	start := -1
	inFence := false
	for i, line := range lines {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if start < 0 {
			if line == heading {
				start = i + 1
			}
			continue
		}
		if n := len(line) - len(strings.TrimLeft(line, "#")); n > 0 && n <= level && strings.HasPrefix(line[n:], " ") {
			return strings.Join(lines[start:i], "\n")
		}
	}
	if start < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	return strings.Join(lines[start:], "\n")
}

// reasonConstant is a Reason constant of pkg/apis.
type reasonConstant struct {
	name, value, file string
}

// apiReasons reads every string constant named Reason... declared in the
// Go files of pkg/apis (tests and generated files aside).
func apiReasons(t *testing.T) []reasonConstant {
	t.Helper()
	var out []reasonConstant
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, "pkg", "apis"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(d.Name(), "zz_generated") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Reason") {
						continue
					}
					if i >= len(vs.Values) {
						t.Errorf("%s: %s has no value of its own", fset.Position(name.Pos()), name.Name)
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Errorf("%s: %s is not a string literal; the test reads only those", fset.Position(name.Pos()), name.Name)
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						return err
					}
					out = append(out, reasonConstant{name: name.Name, value: v, file: d.Name()})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestREADMEListsEveryReason: every Reason constant of pkg/apis is named,
// in backticks, in README.md: those of NatsBackup and NatsRestore (declared
// in backup_types.go) in "## Backups and restores", every other (the
// NatsCluster's conditions) in "## Reading the status".
func TestREADMEListsEveryReason(t *testing.T) {
	readme := read(t, "README.md")
	const statusHeading, backupHeading = "## Reading the status", "## Backups and restores"
	sections := map[string]string{
		statusHeading: section(t, readme, statusHeading),
		backupHeading: section(t, readme, backupHeading),
	}
	reasons := apiReasons(t)
	if len(reasons) < 40 {
		t.Fatalf("found %d Reason constants in pkg/apis; the check would prove little", len(reasons))
	}
	for _, r := range reasons {
		heading := statusHeading
		if strings.HasPrefix(r.file, "backup") {
			heading = backupHeading
		}
		if !strings.Contains(sections[heading], "`"+r.value+"`") {
			t.Errorf("README.md's %q does not name %s (`%s`, %s): add it with what it means", heading, r.name, r.value, r.file)
		}
	}
}

// TestREADMETableOfTestsNamesEveryPackage: the table under "### The tests,
// and what each package proves" names, in its first column, every package
// under pkg/ and test/ that has tests (a package under an internal/
// directory counts as part of the package above it), and only those.
func TestREADMETableOfTestsNamesEveryPackage(t *testing.T) {
	const heading = "### The tests, and what each package proves"
	table := section(t, read(t, "README.md"), heading)
	named := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range codeRE.FindAllStringSubmatch(first, -1) {
			named[m[1]] = true
		}
	}
	tested := map[string]bool{}
	for _, top := range []string{"pkg", "test"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "internal") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), "_test.go") {
				rel, err := filepath.Rel(root, filepath.Dir(path))
				if err != nil {
					return err
				}
				tested[filepath.ToSlash(rel)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(tested) < 10 || len(named) < 10 {
		t.Fatalf("found %d tested packages and %d in the table; the check would prove little", len(tested), len(named))
	}
	for _, p := range sortedKeys(tested) {
		if !named[p] {
			t.Errorf("README.md's %q does not name %s, which has tests: add a row saying what they prove", heading, p)
		}
	}
	for _, p := range sortedKeys(named) {
		if !tested[p] {
			t.Errorf("README.md's %q names %s, which is not a package with tests under pkg/ or test/", heading, p)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// goTestRE is a Go test, fuzz test or benchmark as the docs name one.
var goTestRE = regexp.MustCompile(`\b(?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*\b`)

// TestDocsNameOnlyTestsThatExist: every Go test README.md and docs/*.md
// name (TestRollingUpgradeUnderLoad, FuzzPlan, ...) is a function of some
// _test.go file of the repository, so a renamed test cannot leave the
// README quoting it.
func TestDocsNameOnlyTestsThatExist(t *testing.T) {
	defined := map[string]bool{}
	funcRE := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "third_party") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range funcRE.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, f := range markdownFiles(t) {
		if f == "docs/api.md" {
			continue
		}
		seen := map[string]bool{}
		for _, name := range goTestRE.FindAllString(read(t, f), -1) {
			if seen[name] {
				continue
			}
			seen[name] = true
			named++
			if !defined[name] {
				t.Errorf("%s names %s, which no _test.go file of the repository defines", f, name)
			}
		}
	}
	if named < 10 {
		t.Fatalf("the docs name %d Go tests; the check would prove little", named)
	}
}
