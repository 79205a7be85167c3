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
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
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
