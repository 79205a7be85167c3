package main

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// readmeFlagsParagraph is how the README's paragraph listing the
// controller's flags starts; the paragraph ends at the next blank line.
const readmeFlagsParagraph = "Controller flags:"

// readmeFlags returns the flags README.md's flags paragraph names in
// backticks: those written with two dashes (the controller's own) and
// those written with one (klog's, such as -v=2).
func readmeFlags(t *testing.T) (own, klogs []string) {
	t.Helper()
	para := readmeParagraph(t)
	// A flag in backticks: `--name`, `--name=value`, `-v=2`.
	re := regexp.MustCompile("`(--?)([a-z][a-z0-9-]*)(=[^`]*)?`")
	seen := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(para, -1) {
		dashes, name := m[1], m[2]
		if seen[dashes+name] {
			continue
		}
		seen[dashes+name] = true
		if dashes == "--" {
			own = append(own, name)
		} else {
			klogs = append(klogs, name)
		}
	}
	sort.Strings(own)
	sort.Strings(klogs)
	return own, klogs
}

// readmeParagraph returns README.md's flags paragraph: from
// readmeFlagsParagraph to the next blank line.
func readmeParagraph(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	i := strings.Index(readme, readmeFlagsParagraph)
	if i < 0 {
		t.Fatalf("README.md has no paragraph starting %q", readmeFlagsParagraph)
	}
	para := readme[i:]
	if j := strings.Index(para, "\n\n"); j >= 0 {
		para = para[:j]
	}
	return para
}

// TestREADMEListsEveryFlag: README.md's "Controller flags:" paragraph names
// every flag registerFlags registers, and every flag it names with two
// dashes is one of them. Flags it names with one dash must be klog's
// (klog.InitFlags registers them beside ours; the README points to them as
// "the klog flags" without listing each).
func TestREADMEListsEveryFlag(t *testing.T) {
	fs := flag.NewFlagSet("nats-operator", flag.ContinueOnError)
	registerFlags(fs, &options{})
	var registered []string
	fs.VisitAll(func(f *flag.Flag) { registered = append(registered, f.Name) })
	if len(registered) < 10 {
		t.Fatalf("registerFlags registered %d flags; the check would prove little", len(registered))
	}
	// --version is read before the flags are parsed (versionRequested), so
	// it is no flag of the FlagSet; -help lists it all the same.
	if versionRequested([]string{"--version"}) {
		registered = append(registered, "version")
		fs.Bool("version", false, "")
	}

	own, klogs := readmeFlags(t)
	for _, name := range registered {
		if !slices.Contains(own, name) {
			t.Errorf("nats-operator has the flag --%s, which README.md's %q paragraph does not list", name, readmeFlagsParagraph)
		}
	}
	for _, name := range own {
		if fs.Lookup(name) == nil {
			t.Errorf("README.md's %q paragraph lists --%s, which nats-operator does not have", readmeFlagsParagraph, name)
		}
	}

	// main registers klog's flags too (klog.InitFlags): the paragraph must
	// say so, though it need not list them.
	if !strings.Contains(readmeParagraph(t), "klog") {
		t.Errorf("README.md's %q paragraph does not mention klog's flags, which nats-operator also takes", readmeFlagsParagraph)
	}
	klogFS := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFS)
	for _, name := range klogs {
		if klogFS.Lookup(name) == nil {
			t.Errorf("README.md's %q paragraph names -%s with one dash, as a klog flag, but klog has no such flag (the controller's own flags are written with two)", readmeFlagsParagraph, name)
		}
		if fs.Lookup(name) != nil {
			t.Errorf("README.md's %q paragraph names the controller's flag --%s with one dash; write it with two", readmeFlagsParagraph, name)
		}
	}
}

// flagRegistrations are the functions of package flag (and methods of
// flag.CommandLine) that register a flag.
var flagRegistrations = map[string]bool{
	"Bool": true, "BoolVar": true, "BoolFunc": true, "Duration": true, "DurationVar": true,
	"Float64": true, "Float64Var": true, "Func": true, "Int": true, "IntVar": true,
	"Int64": true, "Int64Var": true, "String": true, "StringVar": true, "TextVar": true,
	"Uint": true, "UintVar": true, "Uint64": true, "Uint64Var": true, "Var": true,
}

// flagsOutsideRegisterFlags returns the position of every call in the Go
// files of dir (tests aside) that registers a flag on the global flag set
// (flag.Bool, flag.CommandLine.Bool, ...) outside a function named
// registerFlags, and how many files it read.
func flagsOutsideRegisterFlags(dir string) (found []string, files int, err error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, 0, err
	}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, 0, err
		}
		files++
		// The local name of the import "flag" in this file, if any.
		flagName := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == `"flag"` {
				flagName = "flag"
				if imp.Name != nil {
					flagName = imp.Name.Name
				}
			}
		}
		if flagName == "" {
			continue
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Name.Name == "registerFlags" && fn.Recv == nil {
				continue
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || !flagRegistrations[sel.Sel.Name] {
					return true
				}
				switch x := sel.X.(type) {
				case *ast.Ident: // flag.Bool(...)
					if x.Name != flagName {
						return true
					}
				case *ast.SelectorExpr: // flag.CommandLine.Bool(...)
					if id, ok := x.X.(*ast.Ident); !ok || id.Name != flagName || x.Sel.Name != "CommandLine" {
						return true
					}
				default:
					return true
				}
				found = append(found, fset.Position(call.Pos()).String())
				return true
			})
		}
	}
	return found, files, nil
}

// TestEveryFlagIsRegisteredByRegisterFlags: no code of this command
// registers a flag on the global flag set outside registerFlags, so
// TestREADMEListsEveryFlag sees every flag `nats-operator -help` prints
// (klog's aside). A flag registered elsewhere would escape that check.
func TestEveryFlagIsRegisteredByRegisterFlags(t *testing.T) {
	found, files, err := flagsOutsideRegisterFlags(".")
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no Go file of the command was checked")
	}
	for _, pos := range found {
		t.Errorf("%s: a flag registered on the global flag set outside registerFlags (flags.go); register it there, so TestREADMEListsEveryFlag checks that the README lists it", pos)
	}
}

// TestFlagsOutsideRegisterFlagsFindsThem: the check above does find a flag
// registered in main, in either form, and leaves registerFlags and a
// FlagSet of its own (as the backup and restore commands have) alone.
func TestFlagsOutsideRegisterFlagsFindsThem(t *testing.T) {
	dir := t.TempDir()
	src := `package main

import (
	"flag"
	"os"
)

func main() {
	_ = flag.Bool("version", false, "")
	flag.CommandLine.StringVar(new(string), "other", "", "")
	fs := flag.NewFlagSet("backup", flag.ExitOnError)
	fs.String("claim", "", "")
	_ = os.Args
}

func registerFlags(fs *flag.FlagSet) {
	flag.IntVar(new(int), "workers", 2, "")
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	found, files, err := flagsOutsideRegisterFlags(dir)
	if err != nil {
		t.Fatal(err)
	}
	if files != 1 || len(found) != 2 || !strings.Contains(found[0], "main.go:9:") || !strings.Contains(found[1], "main.go:10:") {
		t.Errorf("found %q in %d files; want the two calls of main (lines 9 and 10) in 1 file", found, files)
	}
}
