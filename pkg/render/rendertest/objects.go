package rendertest

import (
	"bytes"
	"os"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	trustv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/trust/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// Objects are a NatsCluster and the objects it owns, as read from a YAML
// stream (LoadObjects).
type Objects struct {
	Cluster      *clusterv1beta1.NatsCluster
	Services     []*corev1.Service
	PDB          *policyv1.PodDisruptionBudget
	ConfigMaps   []*corev1.ConfigMap
	StatefulSets []*appsv1.StatefulSet
	// With spec.auth: the trust it names and the system credentials Secret.
	OperatorTrust *trustv1beta1.NatsOperatorTrust
	AccountTrusts []*trustv1beta1.NatsAccountTrust
	Secrets       []*corev1.Secret
}

// Trust is the render.Trust the objects' trusts resolve to; nil without
// an OperatorTrust.
func (o *Objects) Trust() *render.Trust {
	if o.OperatorTrust == nil {
		return nil
	}
	tr := &render.Trust{OperatorJWT: o.OperatorTrust.Spec.OperatorJWT, SystemAccountJWT: o.OperatorTrust.Spec.SystemAccountJWT}
	for _, a := range o.AccountTrusts {
		tr.Accounts = append(tr.Accounts, render.AccountTrust{Name: a.Name, PublicKey: a.Spec.PublicKey, JWT: a.Spec.JWT})
	}
	return tr
}

// LoadObjects reads a YAML stream of a NatsCluster, Services, a
// PodDisruptionBudget, ConfigMaps and StatefulSets (the legacy fixtures under
// pkg/render/testdata).
func LoadObjects(t testing.TB, path string) *Objects {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs := &Objects{}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		doc = bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---"))
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		into := func(v any) {
			if err := yaml.UnmarshalStrict(doc, v); err != nil {
				t.Fatalf("%s: %s: %v", path, tm.Kind, err)
			}
		}
		switch tm.Kind {
		case "NatsCluster":
			objs.Cluster = &clusterv1beta1.NatsCluster{}
			into(objs.Cluster)
		case "Service":
			s := &corev1.Service{}
			into(s)
			objs.Services = append(objs.Services, s)
		case "PodDisruptionBudget":
			objs.PDB = &policyv1.PodDisruptionBudget{}
			into(objs.PDB)
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			into(cm)
			objs.ConfigMaps = append(objs.ConfigMaps, cm)
		case "StatefulSet":
			sts := &appsv1.StatefulSet{}
			into(sts)
			objs.StatefulSets = append(objs.StatefulSets, sts)
		case "NatsOperatorTrust":
			objs.OperatorTrust = &trustv1beta1.NatsOperatorTrust{}
			into(objs.OperatorTrust)
		case "NatsAccountTrust":
			at := &trustv1beta1.NatsAccountTrust{}
			into(at)
			objs.AccountTrusts = append(objs.AccountTrusts, at)
		case "Secret":
			sec := &corev1.Secret{}
			into(sec)
			objs.Secrets = append(objs.Secrets, sec)
		default:
			t.Fatalf("%s: unexpected kind %q", path, tm.Kind)
		}
	}
	if objs.Cluster == nil {
		t.Fatalf("%s has no NatsCluster", path)
	}
	return objs
}
