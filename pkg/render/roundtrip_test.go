package render_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// TestRenderedObjectsSurviveAPIServerDefaulting creates every rendered
// object (dry run) on a real kube-apiserver and checks that what it would
// store, defaults filled in, compares equal to what was rendered: a
// controller comparing live objects with rendered ones sees no difference
// where there is none.
func TestRenderedObjectsSurviveAPIServerDefaulting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver")
	}
	env := testenv.Start(t, testenv.Options{SkipCRDs: true})
	kc, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := rt.NewTrust(t, rt.WithAccounts("orders"))
	tests := []struct {
		name string
		in   render.Input
	}{
		{"one server without JetStream", render.Input{Cluster: rt.NewCluster("ns", "a", rt.Replicas(1))}},
		{"three servers with a claim, memory and CPU", render.Input{Cluster: rt.NewCluster("ns", "b",
			rt.Claim("10Gi", "fast"), rt.MemoryLimit("1Gi"), rt.CPURequest("500m"), rt.ServerTag("az", "a"))}},
		{"operator mode", render.Input{Cluster: rt.NewCluster("ns", "c", rt.JetStream(), rt.Auth("t", "orders")), Trust: f.Trust()}},
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "nats-operator"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render.Render(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range out.Servers {
				got, err := kc.AppsV1().StatefulSets("ns").Create(ctx, s.StatefulSet, dry)
				if err != nil {
					t.Fatalf("creating StatefulSet %s: %v", s.Name, err)
				}
				if !apiequality.Semantic.DeepEqual(s.StatefulSet.Spec, got.Spec) {
					t.Errorf("StatefulSet %s as stored differs from rendered (-rendered +stored):\n%s", s.Name, cmp.Diff(s.StatefulSet.Spec, got.Spec))
				}
				// A StatefulSet written before the template-revision
				// annotation existed is recognised by the digest of its
				// stored spec.
				delete(got.Spec.Template.Annotations, clusterv1beta1.AnnotationTemplateRevision)
				if rev := render.TemplateRevisionOf(got); rev != s.TemplateRevision {
					t.Errorf("StatefulSet %s as stored, without its template-revision annotation, has template revision %s, rendered %s", s.Name, rev, s.TemplateRevision)
				}
				cm, err := kc.CoreV1().ConfigMaps("ns").Create(ctx, s.ConfigMap, dry)
				if err != nil {
					t.Fatalf("creating ConfigMap %s: %v", s.Name, err)
				}
				if !apiequality.Semantic.DeepEqual(s.ConfigMap.Data, cm.Data) {
					t.Errorf("ConfigMap %s data changed when stored", s.Name)
				}
			}
			for _, svc := range []*corev1.Service{out.ClientService, out.HeadlessService} {
				got, err := kc.CoreV1().Services("ns").Create(ctx, svc, dry)
				if err != nil {
					t.Fatalf("creating Service %s: %v", svc.Name, err)
				}
				if !apiequality.Semantic.DeepEqual(svc.Spec.Ports, got.Spec.Ports) || !apiequality.Semantic.DeepEqual(svc.Spec.Selector, got.Spec.Selector) {
					t.Errorf("Service %s ports or selector differ when stored:\n%s", svc.Name, cmp.Diff(svc.Spec, got.Spec))
				}
			}
			got, err := kc.PolicyV1().PodDisruptionBudgets("ns").Create(ctx, out.PDB, dry)
			if err != nil {
				t.Fatalf("creating PDB: %v", err)
			}
			if !apiequality.Semantic.DeepEqual(out.PDB.Spec, got.Spec) {
				t.Errorf("PDB differs when stored:\n%s", cmp.Diff(out.PDB.Spec, got.Spec))
			}
		})
	}
}
