package main

import (
	"bytes"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
)

// CredsKey is the Secret key of a creds file, the default of
// spec.auth.systemCredentials.secretKeyRef.key.
const CredsKey = "user.creds"

// Manifest is one Kubernetes object to print, with the file it goes to.
type Manifest struct {
	File   string
	Object runtime.Object
}

// Manifests returns the objects that carry the chain for the NatsCluster
// auth of a cluster called name: NatsOperatorTrust <name>, NatsAccountTrust
// <name>-app, Secrets <name>-system-creds and <name>-app-creds. An empty
// namespace leaves it unset, for kubectl apply -n.
func Manifests(c *Chain, name, namespace string) []Manifest {
	meta := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: namespace, Labels: map[string]string{
			"app.kubernetes.io/name":     "nats",
			"app.kubernetes.io/instance": name,
		}}
	}
	trustTypeMeta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: trustv1beta1.SchemeGroupVersion.String(), Kind: kind}
	}
	secret := func(n string, creds []byte) *corev1.Secret {
		return &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: meta(n),
			Type:       corev1.SecretTypeOpaque,
			StringData: map[string]string{CredsKey: string(creds)},
		}
	}
	return []Manifest{
		{"natsoperatortrust.yaml", &trustv1beta1.NatsOperatorTrust{
			TypeMeta:   trustTypeMeta("NatsOperatorTrust"),
			ObjectMeta: meta(name),
			Spec: trustv1beta1.NatsOperatorTrustSpec{
				OperatorJWT:      c.OperatorJWT,
				SystemAccountJWT: c.SystemAccountJWT,
			},
		}},
		{"natsaccounttrust-app.yaml", &trustv1beta1.NatsAccountTrust{
			TypeMeta:   trustTypeMeta("NatsAccountTrust"),
			ObjectMeta: meta(name + "-app"),
			Spec: trustv1beta1.NatsAccountTrustSpec{
				PublicKey: c.AppAccountPublicKey,
				JWT:       c.AppAccountJWT,
			},
		}},
		{"secret-system-creds.yaml", secret(name+"-system-creds", c.SystemUserCreds)},
		{"secret-app-creds.yaml", secret(name+"-app-creds", c.AppUserCreds)},
	}
}

// MarshalYAML renders obj as YAML without the empty creationTimestamp that
// typed objects carry.
func MarshalYAML(obj runtime.Object) ([]byte, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	return yaml.Marshal(m)
}

// JoinYAML renders the manifests as one multi-document YAML stream.
func JoinYAML(ms []Manifest) ([]byte, error) {
	var b bytes.Buffer
	for i, m := range ms {
		y, err := MarshalYAML(m.Object)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.File, err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}
