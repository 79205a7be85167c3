package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
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

// TestOnlyTheGathererReads: a sync decides on what it gathered first; no
// decision, write or report reads again. The sources of reads are the
// fields of Sources (every lister and the API reader), taken from the type
// itself, so a lister added there is checked without a change here: only
// the gatherer (the gather*.go files, and gather* functions) touches them,
// New, which wires them, and the event handlers, which find the clusters
// to enqueue. No other
// function calls Get or List on a client (kubeClient, natsClient, dynamic).
// decide is pure: one result, no context, no client, no clock.
func TestOnlyTheGathererReads(t *testing.T) {
	sources := map[string]bool{}
	st := reflect.TypeOf(Sources{})
	for i := range st.NumField() {
		sources[st.Field(i).Name] = true
	}
	if len(sources) < 10 {
		t.Fatalf("Sources has %d fields; the check would prove nothing", len(sources))
	}
	clients := map[string]bool{"kubeClient": true, "natsClient": true, "dynamic": true, "kube": true}
	// chain names every identifier and selector of a receiver expression.
	var chain func(e ast.Expr) []string
	chain = func(e ast.Expr) []string {
		switch e := e.(type) {
		case *ast.Ident:
			return []string{e.Name}
		case *ast.SelectorExpr:
			return append(chain(e.X), e.Sel.Name)
		case *ast.CallExpr:
			return chain(e.Fun)
		case *ast.IndexExpr:
			return chain(e.X)
		}
		return nil
	}
	reads, gets := 0, 0
	for f, file := range sourceFiles(t) {
		gatherFile := strings.HasPrefix(f, "gather")
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			allowed := gatherFile || strings.HasPrefix(name, "gather") ||
				strings.HasPrefix(name, "enqueue") || name == "resolveControllerRef" || name == "New"
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					names := chain(n.X)
					if !sources[n.Sel.Name] || len(names) == 0 || names[len(names)-1] != "src" {
						return true
					}
					reads++
					if !allowed {
						t.Errorf("%s: %s reads Sources.%s; only the gatherer (gather*) reads", f, name, n.Sel.Name)
					}
				case *ast.CallExpr:
					sel, ok := n.Fun.(*ast.SelectorExpr)
					if !ok || (sel.Sel.Name != "Get" && sel.Sel.Name != "List") {
						return true
					}
					for _, x := range chain(sel.X) {
						if clients[x] {
							gets++
							if !gatherFile {
								t.Errorf("%s: %s calls %s on a client; only the gatherer reads from the API server", f, name, sel.Sel.Name)
							}
							break
						}
					}
				}
				return true
			})
		}
	}
	if reads < 10 || gets < 3 {
		t.Fatalf("found %d reads of Sources and %d client reads; the check would prove nothing", reads, gets)
	}
}

// TestDecideIsPure: decide returns one value (the plan), takes no
// context, and its file imports no client, no context and does not read
// the clock: it decides on the facts and the observation alone.
func TestDecideIsPure(t *testing.T) {
	file := sourceFiles(t)["decide.go"]
	if file == nil {
		t.Fatal("no decide.go")
	}
	for _, imp := range file.Imports {
		p := strings.Trim(imp.Path.Value, `"`)
		if strings.HasPrefix(p, "k8s.io/client-go") || p == "context" || p == "net/http" || strings.HasPrefix(p, "github.com/nats-io/") {
			t.Errorf("decide.go imports %s: decide reads nothing", p)
		}
	}
	found := false
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok {
			continue
		}
		if fn.Name.Name == "decide" && fn.Recv == nil {
			found = true
			if n := fn.Type.Results.NumFields(); n != 1 {
				t.Errorf("decide returns %d values, want 1 (the plan)", n)
			}
		}
		ast.Inspect(fn, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since") {
					t.Errorf("decide.go: %s reads the clock (time.%s); now comes in decideOptions", fn.Name.Name, sel.Sel.Name)
				}
			}
			return true
		})
	}
	if !found {
		t.Fatal("decide.go has no func decide")
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

// The facts check of the unit tests' syncs (fixture.sync) sees a write to
// any gathered object: clone copies deeply.
func TestTheFactsCheckSeesAWriteToAGatheredObject(t *testing.T) {
	nc := rt.NewCluster("ns", "demo")
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "demo-0", Annotations: map[string]string{"a": "1"}}}
	f := &facts{nc: nc, servers: []serverObjects{{name: "demo-0", statefulSet: sts}},
		claims: map[int32]*corev1.PersistentVolumeClaim{0: {ObjectMeta: metav1.ObjectMeta{Name: "c"}}}}
	gathered := f.clone()
	opt := cmp.Exporter(func(reflect.Type) bool { return true })
	if d := cmp.Diff(gathered, f, opt); d != "" {
		t.Fatalf("a clone differs from its facts: %s", d)
	}
	sts.Annotations["a"] = "2"
	f.claims[0].Name = "other"
	if d := cmp.Diff(gathered, f, opt); !strings.Contains(d, `"2"`) || !strings.Contains(d, "other") {
		t.Errorf("writes to a gathered StatefulSet and claim are not seen: %q", d)
	}
}

// TestNoInternalPackageImportsTheController: the packages under internal/
// are helpers below the controller; the plugin (pkg/kubectlnats) uses the
// controller's public Decide and Sources.
func TestNoInternalPackageImportsTheController(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/nats-operator/nats-operator/internal/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 3 {
		t.Fatalf("go list printed %d internal packages; the check would prove nothing", len(lines))
	}
	for _, l := range lines {
		f := strings.Fields(l)
		for _, imp := range f[1:] {
			if imp == "github.com/nats-operator/nats-operator/pkg/controller" {
				t.Errorf("%s imports pkg/controller", f[0])
			}
		}
	}
}
