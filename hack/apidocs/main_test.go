package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// root is the repository's top directory, seen from this package.
var root = filepath.Join("..", "..")

// generated runs the generator on the repository once per test.
func generated(t *testing.T) string {
	t.Helper()
	b, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAPIDocsAreFresh: docs/api.md is what the generator writes from the
// CRDs and Go types as they are now.
func TestAPIDocsAreFresh(t *testing.T) {
	want := generated(t)
	got, err := os.ReadFile(filepath.Join(root, "docs", "api.md"))
	if err != nil {
		t.Fatalf("%v: run `make codegen` (or go run ./hack/apidocs) to write it", err)
	}
	if string(got) == want {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("docs/api.md is stale: run `make codegen` (or go run ./hack/apidocs). First difference, line %d:\nfile:      %s\ngenerated: %s", i+1, gl, wl)
		}
	}
}

// TestEveryKindAndFieldIsDocumented: every CRD has its section, and the
// rows a reader looks for are there: spec and status fields of the
// repository's own types, down to their leaves.
func TestEveryKindAndFieldIsDocumented(t *testing.T) {
	doc := generated(t)
	for _, kind := range []string{"NatsCluster", "NatsBackup", "NatsRestore", "NatsOperatorTrust", "NatsAccountTrust"} {
		if !strings.Contains(doc, "\n## "+kind+"\n") {
			t.Errorf("no section for %s", kind)
		}
	}
	if i, j := strings.Index(doc, "\n## NatsCluster\n"), strings.Index(doc, "\n## NatsBackup\n"); i < 0 || j < i {
		t.Errorf("NatsCluster's section is not the first")
	}
	for _, row := range []string{
		"| `spec.version` | string |",
		"| `spec.replicas` | integer (int32) |",
		"| `spec.gateway.remotes[].name` | string |",
		"| `spec.auth.resolver` | string |",
		"| `spec.podTemplate.spec.nodeSelector` | map[string]string |",
		"| `status.rollout.gate.waitingFor` | string |",
	} {
		if !strings.Contains(doc, row) {
			t.Errorf("no row starting %s", row)
		}
	}
	if !strings.Contains(doc, "One of: `\"Full\"`, `\"Cache\"`, `\"Memory\"`.") {
		t.Errorf("spec.auth.resolver's allowed values are not listed")
	}
}

// TestKubernetesTypesAreNotExpanded: a field of a Kubernetes type is one
// row naming the type; none of its own fields get a row.
func TestKubernetesTypesAreNotExpanded(t *testing.T) {
	doc := generated(t)
	for _, row := range []string{
		"| `spec.podTemplate.spec.containers` | []Kubernetes core/v1 `Container` |",
		"| `spec.resources` | Kubernetes core/v1 `ResourceRequirements` |",
		"| `spec.jetstream.volumeClaimTemplate.spec` | Kubernetes core/v1 `PersistentVolumeClaimSpec` |",
		"| `status.conditions` | []Kubernetes meta/v1 `Condition` |",
	} {
		if !strings.Contains(doc, row) {
			t.Errorf("no row starting %s", row)
		}
	}
	for _, prefix := range []string{
		"| `spec.podTemplate.spec.containers[]",
		"| `spec.resources.",
		"| `spec.jetstream.volumeClaimTemplate.spec.",
		"| `status.conditions[]",
	} {
		if strings.Contains(doc, prefix) {
			t.Errorf("a row starting %s: a Kubernetes type was expanded", prefix)
		}
	}
	// The rules on a field of a Kubernetes type are the repository's own
	// (controller-gen markers on the field) and are shown.
	if !strings.Contains(doc, "a sidecar (a container other than nats and metrics) must name an image") {
		t.Errorf("the rules of spec.podTemplate.spec.containers are missing")
	}
}

// TestEveryRuleMessageIsShown: the message of every CEL rule of every CRD
// is in the reference (none sits inside a Kubernetes type the reference
// does not expand).
func TestEveryRuleMessageIsShown(t *testing.T) {
	doc := generated(t)
	files, err := filepath.Glob(filepath.Join(root, "manifests", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var visit func(v any)
	visit = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if rules, ok := v["x-kubernetes-validations"].([]any); ok {
				for _, r := range rules {
					m, _ := r.(map[string]any)["message"].(string)
					if m == "" {
						continue
					}
					n++
					if !strings.Contains(doc, text(m)) {
						t.Errorf("the rule message %q is not in the reference", m)
					}
				}
			}
			for _, c := range v {
				visit(c)
			}
		case []any:
			for _, c := range v {
				visit(c)
			}
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		visit(v)
	}
	if n < 20 {
		t.Fatalf("found %d rule messages in the CRDs; the check would prove little", n)
	}
}

// TestAStaleCRDIsAnError: a CRD field the Go types do not have (the CRDs
// were not regenerated) stops the generator with a message saying so.
func TestAStaleCRDIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "manifests", "crds"), 0o755); err != nil {
		t.Fatal(err)
	}
	const file = "nats-operator.io_natsaccounttrusts.yaml"
	b, err := os.ReadFile(filepath.Join(root, "manifests", "crds", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	spec := crd["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)
	spec["properties"].(map[string]any)["notAGoField"] = map[string]any{"type": "string"}
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifests", "crds", file), out, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Generate(dir)
	if err == nil || !strings.Contains(err.Error(), "spec.notAGoField") || !strings.Contains(err.Error(), "make codegen") {
		t.Errorf("Generate with a field the Go type lacks: %v; want an error naming spec.notAGoField and make codegen", err)
	}
}

// TestTextEscapesMarkupOutsideCode: descriptions cannot break a table row
// or turn into HTML, and code spans keep what they hold.
func TestTextEscapesMarkupOutsideCode(t *testing.T) {
	got := text("a | b <name>-x `<c>|d` *e*\nsame paragraph\n\nnext")
	want := "a \\| b &lt;name&gt;-x `<c>\\|d` \\*e\\* same paragraph<br><br>next"
	if got != want {
		t.Errorf("text:\ngot  %s\nwant %s", got, want)
	}
}
