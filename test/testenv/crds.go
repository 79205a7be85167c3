package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ReadManifests decodes every YAML or JSON document of the file at path
// (empty documents are skipped).
func ReadManifests(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// InstallCRDs creates every CustomResourceDefinition in the .yaml, .yml and
// .json files of dir (an existing one is left as it is) and waits until
// each is Established.
func (e *Env) InstallCRDs(ctx context.Context, dir string) error {
	client, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading CRDs: %w", err)
	}
	var files []string
	for _, ent := range entries {
		switch filepath.Ext(ent.Name()) {
		case ".yaml", ".yml", ".json":
			files = append(files, filepath.Join(dir, ent.Name()))
		}
	}
	sort.Strings(files)
	var names []string
	var served []servedResource
	for _, f := range files {
		objs, err := ReadManifests(f)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if obj.GetKind() != "CustomResourceDefinition" {
				continue
			}
			_, err := client.Resource(crdResource).Create(ctx, obj, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating CRD %s from %s: %w", obj.GetName(), f, err)
			}
			names = append(names, obj.GetName())
			served = append(served, servedResources(obj)...)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("no CustomResourceDefinition in %s", dir)
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := client.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return crdConditionTrue(crd, "Established") && crdConditionTrue(crd, "NamesAccepted"), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", name, err)
		}
	}
	// The first write of a new kind takes about 2 s (the apiserver builds
	// what it needs for it); make it now, with a dry run, not in a test.
	warmUp := time.Now()
	errs := make([]error, len(served))
	var wg sync.WaitGroup
	for i, r := range served {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := client.Resource(r.gvr).Namespace(r.namespace)
			if _, err := c.List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
				errs[i] = fmt.Errorf("listing %s: %w", r.gvr.Resource, err)
				return
			}
			warm := &unstructured.Unstructured{}
			warm.SetGroupVersionKind(r.gvr.GroupVersion().WithKind(r.kind))
			warm.SetName("testenv-warm-up")
			_, _ = c.Create(ctx, warm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	e.logf("installed CRDs %s (first writes warmed up in %v)", strings.Join(names, ", "), time.Since(warmUp).Round(time.Millisecond))
	return nil
}

func crdConditionTrue(crd *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// servedResource is a resource a CRD serves.
type servedResource struct {
	gvr       schema.GroupVersionResource
	kind      string
	namespace string // "default" when namespaced, else empty
}

// servedResources returns the resources a CRD serves, one per served version.
func servedResources(crd *unstructured.Unstructured) []servedResource {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
	ns := ""
	if scope == "Namespaced" {
		ns = metav1.NamespaceDefault
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var rs []servedResource
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok || m["served"] != true {
			continue
		}
		name, _ := m["name"].(string)
		rs = append(rs, servedResource{
			gvr:       schema.GroupVersionResource{Group: group, Version: name, Resource: plural},
			kind:      kind,
			namespace: ns,
		})
	}
	return rs
}
