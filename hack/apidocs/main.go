// Command apidocs writes docs/api.md, the API reference of nats-operator,
// from the CRDs under manifests/crds: for each kind its group, version,
// scope, names and kubectl columns, the CEL rules of the whole object, and
// a table of its spec and status fields (path, type, description, whether
// required, default, allowed values, limits and the messages of the CEL
// rules, x-kubernetes-validations). The CRDs are generated from the Go
// types of pkg/apis by hack/update-codegen.sh, which runs this command last:
//
//	go run ./hack/apidocs            # from the repository's top directory
//
// Fields whose Go type is not the repository's own (a Kubernetes type such
// as core/v1 Container, ResourceRequirements or meta/v1 Condition) are not
// expanded: their row names the type and the table goes no deeper, so the
// pod fields under spec.podTemplate.spec are one row each. The Go types are
// found through the generated scheme (pkg/generated/clientset/versioned/
// scheme) and walked beside the schema by JSON field name; a field of the
// CRD that the Go type does not have is an error (the CRDs are stale: run
// make codegen). Types that are leaves in the schema (meta/v1 Time,
// resource.Quantity, meta/v1 Duration) are described as the schema says.
//
// The output depends only on the CRDs and the Go types: properties are
// taken in sorted order, and NatsCluster comes first, then the other kinds
// by group and kind.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/scheme"
)

// module is the import path prefix of the repository's own Go types.
const module = "github.com/nats-operator/nats-operator/"

// firstKind is listed before the others: the kind the others serve.
const firstKind = "NatsCluster"

func main() {
	root := flag.String("root", ".", "the repository's top directory")
	out := flag.String("out", "docs/api.md", "the file to write (a relative path is taken from -root)")
	flag.Parse()
	b, err := Generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
	path := *out
	if !filepath.IsAbs(path) {
		path = filepath.Join(*root, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "apidocs:", err)
		os.Exit(1)
	}
}

// crd is the part of a CustomResourceDefinition the reference shows.
type crd struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind       string   `json:"kind"`
			Plural     string   `json:"plural"`
			ShortNames []string `json:"shortNames"`
			Categories []string `json:"categories"`
		} `json:"names"`
		Scope    string    `json:"scope"`
		Versions []version `json:"versions"`
	} `json:"spec"`
	// file is the CRD's path relative to the repository's top.
	file string
}

type version struct {
	Name    string `json:"name"`
	Served  bool   `json:"served"`
	Storage bool   `json:"storage"`
	Schema  struct {
		OpenAPIV3Schema *node `json:"openAPIV3Schema"`
	} `json:"schema"`
	Columns []struct {
		Name     string `json:"name"`
		JSONPath string `json:"jsonPath"`
		Priority int    `json:"priority"`
	} `json:"additionalPrinterColumns"`
	Subresources map[string]json.RawMessage `json:"subresources"`
}

// node is an OpenAPI v3 schema as a CRD carries it (the fields shown).
type node struct {
	Type                 string            `json:"type"`
	Format               string            `json:"format"`
	Description          string            `json:"description"`
	Properties           map[string]*node  `json:"properties"`
	Items                *node             `json:"items"`
	AdditionalProperties json.RawMessage   `json:"additionalProperties"`
	Required             []string          `json:"required"`
	Enum                 []json.RawMessage `json:"enum"`
	Default              json.RawMessage   `json:"default"`
	Minimum              *float64          `json:"minimum"`
	Maximum              *float64          `json:"maximum"`
	MinLength            *int64            `json:"minLength"`
	MaxLength            *int64            `json:"maxLength"`
	MinItems             *int64            `json:"minItems"`
	MaxItems             *int64            `json:"maxItems"`
	MinProperties        *int64            `json:"minProperties"`
	MaxProperties        *int64            `json:"maxProperties"`
	Pattern              string            `json:"pattern"`
	IntOrString          bool              `json:"x-kubernetes-int-or-string"`
	PreserveUnknown      bool              `json:"x-kubernetes-preserve-unknown-fields"`
	ListType             string            `json:"x-kubernetes-list-type"`
	ListMapKeys          []string          `json:"x-kubernetes-list-map-keys"`
	Rules                []rule            `json:"x-kubernetes-validations"`
}

// rule is a CEL validation rule.
type rule struct {
	Rule              string `json:"rule"`
	Message           string `json:"message"`
	MessageExpression string `json:"messageExpression"`
}

// mapValues is the schema of a map's values, or nil for a node that is not
// a map (additionalProperties absent or a boolean).
func (n *node) mapValues() (*node, error) {
	if len(n.AdditionalProperties) == 0 || n.AdditionalProperties[0] != '{' {
		return nil, nil
	}
	var v node
	if err := json.Unmarshal(n.AdditionalProperties, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Generate returns docs/api.md for the repository at root.
func Generate(root string) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(root, "manifests", "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	var crds []*crd
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var c crd
		if err := yaml.Unmarshal(raw, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if c.Spec.Names.Kind == "" { // the kustomization, not a CRD
			continue
		}
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, err
		}
		c.file = filepath.ToSlash(rel)
		crds = append(crds, &c)
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CRD under %s", filepath.Join(root, "manifests", "crds"))
	}
	sort.Slice(crds, func(i, j int) bool {
		a, b := crds[i].Spec, crds[j].Spec
		if (a.Names.Kind == firstKind) != (b.Names.Kind == firstKind) {
			return a.Names.Kind == firstKind
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		return a.Names.Kind < b.Names.Kind
	})

	var b bytes.Buffer
	b.WriteString("<!-- Code generated by hack/apidocs from manifests/crds and pkg/apis. DO NOT EDIT: change the Go types and run `make codegen`. -->\n\n")
	b.WriteString("# API reference\n\n")
	b.WriteString("Every field of nats-operator's custom resources, as the API server checks them. This file is generated by\n")
	b.WriteString("[hack/apidocs](../hack/apidocs/main.go) from the CRDs under [manifests/crds](../manifests/crds), whose schemas and\n")
	b.WriteString("descriptions come from the Go types and doc comments of [pkg/apis](../pkg/apis); `make codegen` writes it again and\n")
	b.WriteString("`make verify-codegen` fails when it is stale. For what the controller does with these fields, see the\n")
	b.WriteString("[README](../README.md) and [the design](design.md).\n\n")
	b.WriteString("How to read the tables:\n\n")
	b.WriteString("- A field is named by its path from the object's top: `[]` stands for every item of a list and `{key}` for every\n")
	b.WriteString("  value of a map, so `spec.gateway.remotes[].name` is the name of each gateway remote.\n")
	b.WriteString("- **Required** fields must be set when their parent is. Default, allowed values and limits are the schema's, applied\n")
	b.WriteString("  by the API server. **Rules** are the CEL rules (`x-kubernetes-validations`) on the field, by the message the API\n")
	b.WriteString("  server answers with when one fails (the rule itself when it has no message).\n")
	b.WriteString("- A field of a Kubernetes type (a container, resource requirements, a label selector, a condition) is not expanded:\n")
	b.WriteString("  its row names the type, and `kubectl explain` describes its fields. The pod fields a NatsCluster may set under\n")
	b.WriteString("  `spec.podTemplate.spec` are listed one by one for that reason, each with its Kubernetes type.\n\n")
	b.WriteString("Kinds:\n\n")
	for _, c := range crds {
		fmt.Fprintf(&b, "- [%s](#%s) (`%s`)\n", c.Spec.Names.Kind, strings.ToLower(c.Spec.Names.Kind), apiVersions(c))
	}
	for _, c := range crds {
		if err := writeKind(&b, c); err != nil {
			return nil, fmt.Errorf("%s: %w", c.file, err)
		}
	}
	return b.Bytes(), nil
}

// apiVersions lists the group/version of every served version.
func apiVersions(c *crd) string {
	var vs []string
	for _, v := range c.Spec.Versions {
		if v.Served {
			vs = append(vs, c.Spec.Group+"/"+v.Name)
		}
	}
	return strings.Join(vs, "`, `")
}

func writeKind(b *bytes.Buffer, c *crd) error {
	s := c.Spec
	fmt.Fprintf(b, "\n## %s\n", s.Names.Kind)
	for _, v := range s.Versions {
		if !v.Served {
			continue
		}
		root := v.Schema.OpenAPIV3Schema
		if root == nil {
			return fmt.Errorf("version %s has no schema", v.Name)
		}
		gvk := schema.GroupVersionKind{Group: s.Group, Version: v.Name, Kind: s.Names.Kind}
		obj, err := scheme.Scheme.New(gvk)
		if err != nil {
			return fmt.Errorf("%s has no Go type in the generated scheme: %w", gvk, err)
		}
		goType := reflect.TypeOf(obj).Elem()

		if len(s.Versions) > 1 {
			fmt.Fprintf(b, "\n### %s\n", v.Name)
		}
		fmt.Fprintf(b, "\n`apiVersion: %s/%s`, `kind: %s`; %s", s.Group, v.Name, s.Names.Kind, strings.ToLower(s.Scope))
		if len(s.Names.ShortNames) > 0 {
			fmt.Fprintf(b, "; short names `%s`", strings.Join(s.Names.ShortNames, "`, `"))
		}
		if len(s.Names.Categories) > 0 {
			fmt.Fprintf(b, "; in the categories `%s` (`kubectl get %s`)", strings.Join(s.Names.Categories, "`, `"), s.Names.Categories[0])
		}
		if _, ok := v.Subresources["status"]; ok {
			b.WriteString("; status is a subresource")
		}
		fmt.Fprintf(b, ". Schema: [%s](../%s).\n", c.file, c.file)
		if d := text(root.Description); d != "" {
			fmt.Fprintf(b, "\n%s\n", d)
		}
		if len(v.Columns) > 0 {
			b.WriteString("\nColumns of `kubectl get`: ")
			var cols []string
			for _, col := range v.Columns {
				w := ""
				if col.Priority > 0 {
					w = ", with `-o wide`"
				}
				cols = append(cols, fmt.Sprintf("%s (`%s`%s)", col.Name, col.JSONPath, w))
			}
			b.WriteString(strings.Join(cols, ", ") + ".\n")
		}
		if len(root.Rules) > 0 {
			b.WriteString("\nRules of the whole object:\n\n")
			for _, r := range root.Rules {
				fmt.Fprintf(b, "- %s\n", ruleText(r))
			}
		}
		goFields := fieldsOf(goType)
		for _, name := range []string{"spec", "status"} {
			n, ok := root.Properties[name]
			if !ok {
				continue
			}
			t, ok := goFields[name]
			if !ok {
				return fmt.Errorf("the CRD has %s, the Go type %s has not: run make codegen", name, goType)
			}
			fmt.Fprintf(b, "\n### %s.%s\n\n", s.Names.Kind, name)
			b.WriteString("| Field | Type | Description |\n|---|---|---|\n")
			var rows []row
			if err := walk(&rows, name, n, t, contains(root.Required, name)); err != nil {
				return err
			}
			for _, r := range rows {
				fmt.Fprintf(b, "| `%s` | %s | %s |\n", r.path, r.typ, r.desc)
			}
		}
	}
	return nil
}

// row is one field of a table.
type row struct {
	path, typ, desc string
}

// walk adds the row of the field at path (schema n, Go type t) and, unless
// its type is not the repository's own, the rows of its fields.
func walk(rows *[]row, path string, n *node, t reflect.Type, required bool) error {
	t = deref(t)
	typ, next, nextType, nextPath, err := describeType(path, n, t)
	if err != nil {
		return err
	}
	*rows = append(*rows, row{path: path, typ: typ, desc: describe(n, required)})
	if next == nil {
		return nil
	}
	fields := fieldsOf(nextType)
	names := make([]string, 0, len(next.Properties))
	for name := range next.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ft, ok := fields[name]
		if !ok {
			return fmt.Errorf("%s.%s: the CRD has the field, the Go type %s has not: run make codegen", nextPath, name, nextType)
		}
		if err := walk(rows, nextPath+"."+name, next.Properties[name], ft, contains(next.Required, name)); err != nil {
			return err
		}
	}
	return nil
}

// describeType says the type of the field at path, and which object (its
// schema, Go type and path) the table goes on into: the field itself, the
// items of a list or the values of a map, when they are objects of the
// repository's own types. next is nil when the table stops here.
func describeType(path string, n *node, t reflect.Type) (typ string, next *node, nextType reflect.Type, nextPath string, err error) {
	switch {
	case n.Type == "array" && n.Items != nil:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return "", nil, nil, "", fmt.Errorf("%s: a list in the CRD, %s in Go: run make codegen", path, t)
		}
		et := deref(t.Elem())
		inner, next, nextType, nextPath, err := describeType(path+"[]", n.Items, et)
		return "[]" + inner, next, nextType, nextPath, err
	case n.Type == "object" && len(n.Properties) == 0:
		values, err := n.mapValues()
		if err != nil {
			return "", nil, nil, "", fmt.Errorf("%s: %w", path, err)
		}
		if values == nil {
			if n.PreserveUnknown {
				return "object (any fields)", nil, nil, "", nil
			}
			if foreign(t) {
				return kubeType(t), nil, nil, "", nil
			}
			return "object", nil, nil, "", nil
		}
		if t.Kind() != reflect.Map {
			return "", nil, nil, "", fmt.Errorf("%s: a map in the CRD, %s in Go: run make codegen", path, t)
		}
		inner, next, nextType, nextPath, err := describeType(path+"{key}", values, deref(t.Elem()))
		return "map[string]" + inner, next, nextType, nextPath, err
	case n.Type == "object":
		if t.Kind() != reflect.Struct {
			return "", nil, nil, "", fmt.Errorf("%s: an object in the CRD, %s in Go: run make codegen", path, t)
		}
		if foreign(t) {
			return kubeType(t), nil, nil, "", nil
		}
		return "object", n, t, path, nil
	case n.IntOrString:
		return "integer or string", nil, nil, "", nil
	default:
		typ := n.Type
		if typ == "" {
			typ = "any"
		}
		if n.Format != "" {
			typ += " (" + n.Format + ")"
		}
		return typ, nil, nil, "", nil
	}
}

// describe is a field's description cell: its description, then whether
// it is required, its default, allowed values, limits and rules.
func describe(n *node, required bool) string {
	var parts []string
	if d := text(n.Description); d != "" {
		parts = append(parts, d)
	}
	if required {
		parts = append(parts, "**Required.**")
	}
	parts = append(parts, checks(n)...)
	// What the schema says of each item of a list or value of a map (its
	// description is the field's, or its type's).
	inner, what := n.Items, "Each item"
	if inner == nil {
		inner, _ = n.mapValues()
		what = "Each value"
	}
	if inner != nil {
		if c := checks(inner); len(c) > 0 {
			parts = append(parts, what+": "+strings.Join(c, " "))
		}
	}
	return strings.Join(parts, " ")
}

// checks are what the API server checks of a value: its default, allowed
// values, limits, uniqueness and CEL rules.
func checks(n *node) []string {
	var parts []string
	if len(n.Default) > 0 {
		parts = append(parts, "Default: "+code(string(n.Default))+".")
	}
	if len(n.Enum) > 0 {
		var vs []string
		for _, e := range n.Enum {
			vs = append(vs, code(string(e)))
		}
		parts = append(parts, "One of: "+strings.Join(vs, ", ")+".")
	}
	var limits []string
	if n.Minimum != nil {
		limits = append(limits, "at least "+num(*n.Minimum))
	}
	if n.Maximum != nil {
		limits = append(limits, "at most "+num(*n.Maximum))
	}
	if n.MinLength != nil {
		limits = append(limits, "at least "+count(*n.MinLength, "character"))
	}
	if n.MaxLength != nil {
		limits = append(limits, "at most "+count(*n.MaxLength, "character"))
	}
	if n.MinItems != nil {
		limits = append(limits, "at least "+count(*n.MinItems, "item"))
	}
	if n.MaxItems != nil {
		limits = append(limits, "at most "+count(*n.MaxItems, "item"))
	}
	if n.MinProperties != nil {
		limits = append(limits, "at least "+count(*n.MinProperties, "entry"))
	}
	if n.MaxProperties != nil {
		limits = append(limits, "at most "+count(*n.MaxProperties, "entry"))
	}
	if n.Pattern != "" {
		limits = append(limits, "matching "+code(n.Pattern))
	}
	if len(limits) > 0 {
		parts = append(parts, "Limits: "+strings.Join(limits, ", ")+".")
	}
	if n.ListType == "map" && len(n.ListMapKeys) > 0 {
		parts = append(parts, "Items are unique by "+code(strings.Join(n.ListMapKeys, ", "))+".")
	} else if n.ListType == "set" {
		parts = append(parts, "Items are unique.")
	}
	if len(n.Rules) > 0 {
		var rs []string
		for _, r := range n.Rules {
			rs = append(rs, ruleText(r))
		}
		parts = append(parts, "**Rules:** "+strings.Join(rs, " · "))
	}
	return parts
}

// ruleText is a CEL rule as the API server reports its failure: its
// message, else the expression of its message, else the rule.
func ruleText(r rule) string {
	switch {
	case r.Message != "":
		return text(r.Message)
	case r.MessageExpression != "":
		return "(message computed by " + code(r.MessageExpression) + ") " + code(r.Rule)
	default:
		return code(r.Rule)
	}
}

// text makes a description one cell of a Markdown table: lines of a
// paragraph joined, paragraphs separated by <br><br>, and what Markdown or
// HTML would read as markup (|, <, >, *) escaped outside code spans.
func text(s string) string {
	var paras []string
	for _, p := range strings.Split(strings.TrimSpace(s), "\n\n") {
		lines := strings.Fields(strings.ReplaceAll(p, "\n", " "))
		if len(lines) > 0 {
			paras = append(paras, escape(strings.Join(lines, " ")))
		}
	}
	return strings.Join(paras, "<br><br>")
}

// escape escapes | everywhere (a table cell ends at one, even in code) and
// <, > and * outside code spans.
func escape(s string) string {
	var b strings.Builder
	inCode := false
	for _, r := range s {
		switch {
		case r == '`':
			inCode = !inCode
			b.WriteRune(r)
		case r == '|':
			b.WriteString(`\|`)
		case inCode:
			b.WriteRune(r)
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '*':
			b.WriteString(`\*`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// code puts s in a code span, with room for backticks inside.
func code(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// count is "1 item" or "n items" ("entry": "entries").
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// foreign says whether t is a named type of another module than this
// repository's (a Kubernetes type): the table does not expand it.
func foreign(t reflect.Type) bool {
	return t.Name() != "" && t.PkgPath() != "" && !strings.HasPrefix(t.PkgPath()+"/", module)
}

// kubeType names a foreign type: "Kubernetes core/v1 `Container`" for a
// Kubernetes type, its import path and name otherwise.
func kubeType(t reflect.Type) string {
	p := t.PkgPath()
	if !strings.HasPrefix(p, "k8s.io/") {
		return "`" + p + "." + t.Name() + "`"
	}
	parts := strings.Split(p, "/")
	short := parts[len(parts)-1]
	if len(parts) >= 2 && len(short) > 1 && short[0] == 'v' && short[1] >= '0' && short[1] <= '9' { // a version: core/v1
		short = parts[len(parts)-2] + "/" + short
	}
	return "Kubernetes " + short + " `" + t.Name() + "`"
}

// fieldsOf maps the JSON names of a struct's fields to their types,
// following inlined and embedded structs as encoding/json does.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	t = deref(t)
	if t.Kind() != reflect.Struct {
		return fields
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && (name == "" || strings.Contains(","+opts+",", ",inline,")) {
			for k, v := range fieldsOf(f.Type) {
				if _, ok := fields[k]; !ok {
					fields[k] = v
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}
