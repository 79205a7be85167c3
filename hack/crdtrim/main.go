// Command crdtrim drops the descriptions nested inside the Kubernetes types
// a CRD embeds (the pod fields of spec.podTemplate.spec, a claim's spec):
// the Kubernetes API reference documents them, and kubectl apply keeps the
// whole CRD in an annotation of at most 256 KiB, which the NatsCluster CRD
// would outgrow with them (they were two thirds of its descriptions). The
// description of each field directly under such a type stays, so
// kubectl explain and docs/api.md still say what the field is for.
//
//	go run ./hack/crdtrim manifests/crds/<crd>.yaml ...
//
// hack/update-codegen.sh runs it on the CRDs controller-gen writes.
package main

import (
	"bytes"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// embedded are the property names whose schema is a Kubernetes type
// embedded whole: descriptions below its own fields are dropped.
var embedded = map[string]bool{"podTemplate": true, "volumeClaimTemplate": true}

func main() {
	for _, path := range os.Args[1:] {
		if err := trim(path); err != nil {
			fmt.Fprintln(os.Stderr, "crdtrim:", err)
			os.Exit(1)
		}
	}
}

func trim(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(in, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	walk(crd, 0)
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	if bytes.HasPrefix(in, []byte("---\n")) {
		out = append([]byte("---\n"), out...)
	}
	return os.WriteFile(path, out, 0o644)
}

// walk visits a schema node in state: 0 outside an embedded type, -2 at
// one (podTemplate), -1 at its spec, n >= 1 a property n levels below that
// spec. A node at 2 or deeper loses its description; one at 1 (a field of
// the spec) keeps it. items and additionalProperties are the same field.
func walk(node any, state int) {
	switch n := node.(type) {
	case []any:
		for _, v := range n {
			walk(v, state)
		}
	case map[string]any:
		if state >= 2 {
			delete(n, "description")
		}
		for k, v := range n {
			if k != "properties" {
				walk(v, state)
				continue
			}
			props, _ := v.(map[string]any)
			for name, p := range props {
				walk(p, next(state, name))
			}
		}
	}
}

// next is the state of property name of a node in state.
func next(state int, name string) int {
	switch {
	case state == 0 && embedded[name]:
		return -2
	case state == 0:
		return 0
	case state == -2 && name == "spec":
		return -1
	case state == -2:
		return 0
	case state == -1:
		return 1
	}
	return state + 1
}
