package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/test/framework"
)

// policyClusters are alice's NatsClusters: one server each, one whose pods
// would run as the ServiceAccount builder, one whose pods would mount the
// Secret db; with the field the restricted policy names.
var policyClusters = []struct{ name, field, podTemplate string }{
	{"as-builder", "spec.podTemplate.spec.serviceAccountName", `
    spec:
      serviceAccountName: builder`},
	{"reads-db", "spec.podTemplate.spec.volumes[name=db].secret", `
    spec:
      containers:
      - name: nats
        volumeMounts:
        - name: db
          mountPath: /etc/db
          readOnly: true
      volumes:
      - name: db
        secret:
          secretName: db`},
}

func policyCluster(t *testing.T, name, podTemplate string) *unstructured.Unstructured {
	t.Helper()
	o := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: cluster.nats-operator.io/v1beta1
kind: NatsCluster
metadata:
  name: %s
spec:
  version: "2.15.2"
  replicas: 1
  lameDuck:
    gracePeriod: %s
  podTemplate:%s
`, name, framework.TestLameDuckGracePeriod, podTemplate)), &o.Object); err != nil {
		t.Fatal(err)
	}
	return o
}

// As a user whose Role allows only NatsClusters in namespace team-a (alice
// cannot create a pod there), a podTemplate naming another ServiceAccount
// or a Secret volume is held under the controller's default policy,
// restricted: Progressing=False InvalidSpec naming the field and the
// policy, and no ConfigMap, StatefulSet or pod is written. The same specs
// run under --pod-template-policy=any (the pods run as builder and mount
// db). Back under restricted, the running clusters are held the same way
// and nothing is written but their status: the StatefulSets keep their
// generation, the pods their UID.
func TestPodTemplatePolicyRestrictedRefusesWhatAnyRuns(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ns = "team-a"
	s := framework.OwnController(ctx, t, ns) // no flag: the default, restricted
	lease := "--leader-elect-lease-name=nats-operator-" + ns

	// The cluster admin's objects: the ServiceAccount and the Secret the
	// namespace holds, and alice's Role.
	if _, err := s.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		StringData: map[string]string{"password": "s3cret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "natscluster-author"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{clusterv1beta1.SchemeGroupVersion.Group}, Resources: []string{"natsclusters"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "natscluster-author"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alice := rest.CopyConfig(s.Env.Config)
	alice.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
	aliceKube := kubernetes.NewForConfigOrDie(alice)
	_, err := aliceKube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "direct"},
		Spec: corev1.PodSpec{ServiceAccountName: "builder", Containers: []corev1.Container{{Name: "c", Image: "nats:2.15.2"}}}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("alice creating a pod: %v, want forbidden", err)
	}

	for _, c := range policyClusters {
		if err := framework.ApplyObjects(ctx, alice, ns, policyCluster(t, c.name, c.podTemplate)); err != nil {
			t.Fatalf("alice applying %s: %v", c.name, err)
		}
	}
	held := func(phase string) {
		t.Helper()
		for _, c := range policyClusters {
			want := c.field + `: `
			policy := `is not allowed by the controller's pod template policy "restricted" (--pod-template-policy)`
			poll.Eventually(t, 60*time.Second, 250*time.Millisecond, c.name+" held InvalidSpec "+phase, func() error {
				nc, err := s.Cluster(ctx, ns, c.name)
				if err != nil {
					return err
				}
				if err := framework.CheckCondition(nc, clusterv1beta1.ConditionProgressing, metav1.ConditionFalse, clusterv1beta1.ReasonInvalidSpec); err != nil {
					return err
				}
				p := meta.FindStatusCondition(nc.Status.Conditions, clusterv1beta1.ConditionProgressing)
				if !strings.Contains(p.Message, want) || !strings.Contains(p.Message, policy) {
					return fmt.Errorf("Progressing says %q, want %q ... %q", p.Message, want, policy)
				}
				t.Logf("%s %s: Progressing=False InvalidSpec: %s", c.name, phase, p.Message)
				return nil
			})
		}
	}
	held("as created")
	for _, c := range policyClusters {
		sel := metav1.ListOptions{LabelSelector: clusterv1beta1.LabelCluster + "=" + c.name}
		sts, err := s.Kube.AppsV1().StatefulSets(ns).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		cms, err := s.Kube.CoreV1().ConfigMaps(ns).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		pods, err := s.Kube.CoreV1().Pods(ns).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(sts.Items) + len(cms.Items) + len(pods.Items); n != 0 {
			t.Errorf("%s held, yet %d StatefulSets, %d ConfigMaps, %d pods", c.name, len(sts.Items), len(cms.Items), len(pods.Items))
		}
	}

	// The cluster admin chooses any: the same specs run.
	s.Controller.Stop()
	anyCtrl := framework.StartController(ctx, t, s.Env, "--namespace="+ns, lease, "--pod-template-policy=any")
	for _, c := range policyClusters {
		s.WaitSettledUpToDate(ctx, t, ns, c.name, 3*time.Minute)
	}
	pod := func(cluster string) *corev1.Pod {
		t.Helper()
		p, err := s.Kube.CoreV1().Pods(ns).Get(ctx, render.PodName(cluster, 0), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if sa := pod("as-builder").Spec.ServiceAccountName; sa != "builder" {
		t.Errorf("as-builder's pod runs as %q, want builder", sa)
	}
	mountsDB := false
	for _, v := range pod("reads-db").Spec.Volumes {
		mountsDB = mountsDB || (v.Secret != nil && v.Secret.SecretName == "db")
	}
	if !mountsDB {
		t.Errorf("reads-db's pod has no volume of Secret db: %+v", pod("reads-db").Spec.Volumes)
	}

	// Back under restricted: held, nothing of theirs written.
	before := map[string]string{}
	for _, c := range policyClusters {
		sts, err := s.Kube.AppsV1().StatefulSets(ns).Get(ctx, render.ServerName(c.name, 0), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before[c.name] = fmt.Sprintf("generation %d pod %s", sts.Generation, pod(c.name).UID)
	}
	anyCtrl.Stop()
	restricted := framework.StartController(ctx, t, s.Env, "--namespace="+ns, lease, "--pod-template-policy=restricted")
	held("once running")
	time.Sleep(5 * time.Second) // a few more syncs, each of which could write
	total, ok := restricted.Metric("nats_operator_api_writes_total")
	status, _ := restricted.Metric("nats_operator_api_writes_total", `resource="natsclusters/status"`)
	if !ok || total != status {
		t.Errorf("the restricted controller made %v writes (metrics read: %v), %v of them status, want status only", total, ok, status)
	}
	for _, c := range policyClusters {
		sts, err := s.Kube.AppsV1().StatefulSets(ns).Get(ctx, render.ServerName(c.name, 0), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after := fmt.Sprintf("generation %d pod %s", sts.Generation, pod(c.name).UID); after != before[c.name] {
			t.Errorf("%s: StatefulSet %s, was %s", c.name, after, before[c.name])
		}
		if !pod(c.name).DeletionTimestamp.IsZero() {
			t.Errorf("%s: its pod is being deleted", c.name)
		}
	}
}
