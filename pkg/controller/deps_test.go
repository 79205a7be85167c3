package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestControllerNeverReadsNatsConf: nats.conf is read back by pkg/render
// alone (render.ReadConfig), so the controller imports neither the JWT nor
// the nkeys library (the operator JWT in a config is decoded by render), and
// no file of it decodes JSON or YAML; it only encodes the patch that clears
// one-shot annotations. go list gives the imports, go/ast the calls.
func TestControllerNeverReadsNatsConf(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := strings.Fields(string(out))
	if len(imports) < 10 {
		t.Fatalf("go list printed %d imports; the check would prove nothing", len(imports))
	}
	for _, imp := range imports {
		for _, banned := range []string{"github.com/nats-io/jwt", "github.com/nats-io/nkeys", "sigs.k8s.io/yaml", "gopkg.in/yaml"} {
			if strings.HasPrefix(imp, banned) {
				t.Errorf("pkg/controller imports %s: reading nats.conf is pkg/render's job", imp)
			}
		}
	}
	for f, file := range sourceFiles(t) {
		ast.Inspect(file, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "json" {
				switch sel.Sel.Name {
				case "Unmarshal", "NewDecoder", "Decoder", "RawMessage":
					t.Errorf("%s uses json.%s: the controller decodes no JSON (render.ReadConfig reads nats.conf)", f, sel.Sel.Name)
				}
			}
			return true
		})
	}
}

// TestOnlyTheGathererReadsListers: a sync decides on what it gathered first;
// no write or report reads the caches again. The NatsCluster lister is read
// by sync (the object itself) and by the event handlers that enqueue
// (resolveControllerRef finds the owner of a changed object).
func TestOnlyTheGathererReadsListers(t *testing.T) {
	listers := map[string]bool{"statefulSets": true, "configMaps": true, "pods": true, "services": true,
		"pdbs": true, "secrets": true, "operatorTrusts": true, "accountTrusts": true, "clusters": true}
	reads := 0
	for f, file := range sourceFiles(t) {
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Name.Name == "New" {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || !listers[sel.Sel.Name] {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "c" {
					return true
				}
				reads++
				name := fn.Name.Name
				allowed := strings.HasPrefix(name, "gather") ||
					(sel.Sel.Name == "clusters" && (name == "sync" || name == "resolveControllerRef" || strings.HasPrefix(name, "enqueue")))
				if !allowed {
					t.Errorf("%s: %s reads the %s lister; only the gatherer (gather*) reads listers", f, name, sel.Sel.Name)
				}
				return true
			})
		}
	}
	if reads < 9 {
		t.Fatalf("found %d lister reads; the check would prove nothing", reads)
	}
}

// sourceFiles parses the package's non-test files, by file name.
func sourceFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	files, _ := filepath.Glob("*.go")
	out := map[string]*ast.File{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = file
	}
	if len(out) == 0 {
		t.Fatal("no source files: the checks would prove nothing")
	}
	return out
}
