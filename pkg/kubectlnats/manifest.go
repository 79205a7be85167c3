package kubectlnats

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
)

// manifest is what one file holds: one NatsCluster and, for an offline
// plan, the trusts and Secrets it names.
type manifest struct {
	cluster        *clusterv1beta1.NatsCluster
	operatorTrusts []*trustv1beta1.NatsOperatorTrust
	accountTrusts  []*trustv1beta1.NatsAccountTrust
	secrets        []*corev1.Secret
}

// invalidError is a manifest that does not decode or validate; plan exits
// ExitInvalid with it.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }

// readManifest reads a multi-document YAML (or JSON) file ("-" is stdin).
// Fields the API does not know are an invalidError naming them.
func readManifest(path string, stdin io.Reader) (*manifest, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	m := &manifest{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, &invalidError{fmt.Sprintf("%s: %v", path, err)}
		}
		if len(raw) == 0 {
			continue
		}
		doc, _ := yaml.Marshal(raw)
		var tm metav1.TypeMeta
		_ = yaml.Unmarshal(doc, &tm)
		var obj any
		switch tm.Kind {
		case "NatsCluster":
			if m.cluster != nil {
				return nil, &invalidError{path + ": more than one NatsCluster"}
			}
			m.cluster = &clusterv1beta1.NatsCluster{}
			obj = m.cluster
		case "NatsOperatorTrust":
			t := &trustv1beta1.NatsOperatorTrust{}
			m.operatorTrusts, obj = append(m.operatorTrusts, t), t
		case "NatsAccountTrust":
			t := &trustv1beta1.NatsAccountTrust{}
			m.accountTrusts, obj = append(m.accountTrusts, t), t
		case "Secret":
			s := &corev1.Secret{}
			m.secrets, obj = append(m.secrets, s), s
		default:
			continue // other kinds are not the plan's
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, &invalidError{fmt.Sprintf("%s: %s %s: %v", path, tm.Kind, nameOf(raw), err)}
		}
	}
	for _, s := range m.secrets {
		// As the API server stores it.
		for k, v := range s.StringData {
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
	}
	if m.cluster == nil {
		return nil, &invalidError{path + ": no NatsCluster in the file"}
	}
	if m.cluster.Name == "" {
		return nil, &invalidError{path + ": metadata.name: the NatsCluster has no name"}
	}
	return m, nil
}

func nameOf(raw map[string]any) string {
	if md, ok := raw["metadata"].(map[string]any); ok {
		if n, ok := md["name"].(string); ok {
			return n
		}
	}
	return ""
}

// onlyIn is an error naming both namespaces when an object of the manifest
// at path names a namespace other than ns (the -n given): kubectl apply
// would refuse it too.
func (m *manifest) onlyIn(ns, path string) error {
	objs := []metav1.Object{m.cluster}
	for _, t := range m.operatorTrusts {
		objs = append(objs, t)
	}
	for _, t := range m.accountTrusts {
		objs = append(objs, t)
	}
	for _, s := range m.secrets {
		objs = append(objs, s)
	}
	for _, o := range objs {
		if got := o.GetNamespace(); got != "" && got != ns {
			return fmt.Errorf("%s names namespace %s for %s, but -n is %s: drop -n to plan in %s, or make them agree",
				path, got, o.GetName(), ns, got)
		}
	}
	return nil
}

// inNamespace sets the namespace of every object that has none.
func (m *manifest) inNamespace(ns string) {
	set := func(o metav1.Object) {
		if o.GetNamespace() == "" {
			o.SetNamespace(ns)
		}
	}
	set(m.cluster)
	for _, t := range m.operatorTrusts {
		set(t)
	}
	for _, t := range m.accountTrusts {
		set(t)
	}
	for _, s := range m.secrets {
		set(s)
	}
}
