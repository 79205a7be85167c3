package render

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// configPaths collects the JSON path of every field of a config struct,
// nested structs included ("cluster", "cluster.routes", ...).
func configPaths(t *testing.T, typ reflect.Type, prefix string, out map[string]bool) {
	t.Helper()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			t.Fatalf("field %s.%s of the rendered config has no JSON name", typ.Name(), f.Name)
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		out[path] = true
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			configPaths(t, ft, path, out)
		}
	}
}

// TestEveryConfigFieldIsAFactOrProvenToRoll walks every field of the
// rendered server config: each must be a fact the planner classifies or be
// on the list of fields that roll one server at a time, so a new config block
// (route TLS, say) cannot be added without deciding what a change of it does.
func TestEveryConfigFieldIsAFactOrProvenToRoll(t *testing.T) {
	paths := map[string]bool{}
	configPaths(t, reflect.TypeFor[serverConfig](), "", paths)

	for _, p := range slices.Sorted(maps.Keys(paths)) {
		if _, ok := configFields[p]; !ok {
			t.Errorf("nats.conf field %q is neither a fact the planner classifies nor on the list of fields proven to roll one server at a time: "+
				"add it to Facts (and to rollout.ConfigFacts, rollout.Classify and a case of the route-compatibility matrix), "+
				"or to configFields in facts.go with why it rolls", p)
		}
	}
	factsType := reflect.TypeFor[Facts]()
	named := map[string]bool{"Version": true} // the image tag, not a config field
	for p, role := range configFields {
		if !paths[p] {
			t.Errorf("configFields names %q, which the rendered config does not have", p)
		}
		if role.isFact() {
			if _, ok := factsType.FieldByName(role.fact); !ok {
				t.Errorf("configFields says %q is the fact %s, which Facts does not have", p, role.fact)
			}
			named[role.fact] = true
		} else if role.rolls == "" {
			t.Errorf("configFields gives %q neither a fact nor why it rolls", p)
		}
	}
	// Not of nats.conf: the route CA a server was given is its ConfigMap's
	// AnnotationRoutesCA (readRunning), the target's TLSFiles.CADigest.
	named["RoutesCA"] = true
	for i := range factsType.NumField() {
		if f := factsType.Field(i); !named[f.Name] {
			t.Errorf("Facts.%s comes from no config field in configFields", f.Name)
		}
	}
}

// TestTheWalkSeesWhatTheConfigRenders fills every field of a config and
// checks that the JSON it encodes to has exactly the walked paths, so the
// walk above cannot miss a field the encoder writes.
func TestTheWalkSeesWhatTheConfigRenders(t *testing.T) {
	var c serverConfig
	fill(reflect.ValueOf(&c).Elem())
	raw, err := marshalConfig(&c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	jsonPaths(m, "", got)
	want := map[string]bool{}
	configPaths(t, reflect.TypeFor[serverConfig](), "", want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("encoded paths %v\nwalked paths %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
}

func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	}
}

func jsonPaths(m map[string]any, prefix string, out map[string]bool) {
	for k, v := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out[p] = true
		// Maps of the config (resolver_preload) are leaves: their keys are
		// data, not fields.
		if sub, ok := v.(map[string]any); ok && p != "resolver_preload" {
			jsonPaths(sub, p, out)
		}
	}
}
