package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// quickstart is the earlier controller's quickstart NatsCluster, unchanged
// but for its apiVersion and a version the local node has (2.15.2 for
// 2.15.0): its claim template names no accessModes (that controller
// defaulted them).
const quickstart = `
apiVersion: cluster.nats-operator.io/v1beta1
kind: NatsCluster
metadata:
  name: demo
spec:
  version: "2.15.2"
  replicas: 3
  resources:
    limits:
      memory: 4Gi
  jetstream:
    volumeClaimTemplate:
      spec:
        storageClassName: standard
        resources:
          requests:
            storage: 10Gi
`

// The earlier controller's quickstart, whose claim template has no
// accessModes, runs: they default to ReadWriteOnce.
func TestQuickstartWithoutAccessModesRuns(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsQuickstart)
	s.CreateNamespace(ctx, t, s.NS)

	var obj map[string]any
	if err := yaml.Unmarshal([]byte(quickstart), &obj); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.ApplyObjects(ctx, t, s.NS, &unstructured.Unstructured{Object: obj})
	nc := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
	t.Logf("Ready, Settled and UpToDate after %s: %s", time.Since(start).Round(time.Millisecond), framework.Conditions(nc))
	pvc, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, "data-demo-0-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pvc.Spec.AccessModes; len(got) != 1 || got[0] != corev1.ReadWriteOnce {
		t.Errorf("claim data-demo-0-0 has access modes %v, want [ReadWriteOnce]", got)
	}
	t.Logf("claim data-demo-0-0: access modes %v, storage class %q", pvc.Spec.AccessModes, *pvc.Spec.StorageClassName)
}

// A write the API server refuses (here an admission policy of the
// namespace's owners: no nats server above 2Gi of memory) is reported within
// a sync: Progressing=False ReconcileFailed with the API server's words, and
// an Event. Fixing the spec proceeds.
func TestRefusedWriteIsReportedAndFixingItProceeds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsRefused)
	s.CreateNamespace(ctx, t, s.NS)

	const policyMessage = "StatefulSets in this namespace may not ask for more than 2Gi of memory per container"
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "memory-cap"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"statefulsets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object.spec.template.spec.containers.all(c, !has(c.resources) || !has(c.resources.limits) || !('memory' in c.resources.limits) || quantity(c.resources.limits['memory']).compareTo(quantity('2Gi')) <= 0)",
				Message:    policyMessage,
			}},
		},
	}
	if _, err := s.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "memory-cap"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        "memory-cap",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: s.NS},
			}},
		},
	}
	if _, err := s.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The policy takes effect once the API server's informer has it: wait
	// until a dry-run StatefulSet of 4Gi is denied.
	poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "the policy denies a 4Gi StatefulSet", func() error {
		if err := dryRunStatefulSet(ctx, s, "4Gi"); err == nil || !strings.Contains(err.Error(), policyMessage) {
			return fmt.Errorf("not denied yet (%v)", err)
		}
		return nil
	})

	applied := time.Now()
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(o.Object, "4Gi", "spec", "resources", "limits", "memory")
	})
	var held *clusterv1beta1.NatsCluster
	poll.Eventually(t, 5*time.Second, 100*time.Millisecond, "Progressing=False ReconcileFailed", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		held = nc
		return framework.CheckCondition(nc, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, clusterv1beta1.ReasonReconcileFailed)
	})
	cond := conditionOf(held, clusterv1beta1.ConditionProgressing)
	t.Logf("after %s: %s: %s", time.Since(applied).Round(time.Millisecond), cond.Reason, cond.Message)
	for _, want := range []string{"StatefulSet " + s.NS + "/demo-", policyMessage} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("the Progressing message does not carry %q: %s", want, cond.Message)
		}
	}
	poll.Eventually(t, 10*time.Second, 200*time.Millisecond, "a ReconcileFailed Event", func() error {
		events, err := s.Events(ctx, s.NS, "demo", clusterv1beta1.ReasonReconcileFailed)
		if err != nil {
			return err
		}
		for _, e := range events {
			if strings.Contains(e.Message, policyMessage) {
				t.Logf("Event %s %s: %s", e.Type, e.Reason, e.Message)
				return nil
			}
		}
		return errors.New("no Event yet")
	})
	sets, err := s.Kube.AppsV1().StatefulSets(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) != 0 {
		t.Errorf("%d StatefulSets exist while every one is refused", len(sets.Items))
	}

	// The fix: a memory limit the policy allows.
	fixed := time.Now()
	patch := []byte(`{"spec":{"resources":{"limits":{"memory":"1Gi"}}}}`)
	if _, err := s.Nats.ClusterV1beta1().NatsClusters(s.NS).Patch(ctx, "demo", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	nc := s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
	t.Logf("fixed: Ready, Settled and UpToDate %s after the patch: %s", time.Since(fixed).Round(time.Millisecond), framework.Conditions(nc))
}

// dryRunStatefulSet submits, with dry-run, a StatefulSet whose container
// asks for this memory limit.
func dryRunStatefulSet(ctx context.Context, s *framework.Stack, memory string) error {
	labels := map[string]string{"app": "probe"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec: appsv1.StatefulSetSpec{
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			ServiceName: "probe",
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "c", Image: "nats",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}},
				}}},
			},
		},
	}
	_, err := s.Kube.AppsV1().StatefulSets(s.NS).Create(ctx, sts, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func conditionOf(nc *clusterv1beta1.NatsCluster, typ string) metav1.Condition {
	for _, c := range nc.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}
