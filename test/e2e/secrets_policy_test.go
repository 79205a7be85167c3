package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/test/framework"
)

var nsSecretsPolicy = framework.SharedNamespace("secrets-policy")

// The controller's ServiceAccount, as manifests/rbac names it, and the
// ValidatingAdmissionPolicy of manifests/rbac/secrets_policy.yaml.
const (
	controllerUser      = "system:serviceaccount:nats-system:nats-operator"
	secretsPolicy       = "nats-operator-secrets"
	secretsPolicyDenied = "ValidatingAdmissionPolicy '" + secretsPolicy + "'"
)

// The ValidatingAdmissionPolicy of manifests/rbac (installed with the RBAC
// on the package's control plane, so every controller of the suite, which
// runs as the nats-system/nats-operator ServiceAccount, writes its Secrets
// under it) lets that ServiceAccount write only the Secrets a NatsCluster
// controls. As the ServiceAccount (client-go impersonation, and
// kubectl --as for one request): a user's Secret cannot be updated,
// patched or deleted (patch and delete, which the ClusterRole does not
// grant, granted by a Role in the test's namespace so that the policy is
// what refuses them), an unmarked Secret or a marked service-account token
// cannot be created; a Secret a NatsCluster controls can be created,
// updated, patched and deleted, also one without the label (as an older
// release might have left it), but not taken out of the NatsCluster's
// control. Meanwhile the shared controller creates a cluster's Secrets
// (system user, routes CA and certificate), each updatable by its
// ServiceAccount (dry run), brings the cluster up, and its log shows no
// write the policy refused.
func TestSecretsPolicy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsSecretsPolicy)
	ns := s.NS
	begin := time.Now()

	if _, err := s.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, secretsPolicy, metav1.GetOptions{}); err != nil {
		t.Fatalf("the ValidatingAdmissionPolicy of manifests/rbac is not installed: %v", err)
	}
	if _, err := s.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, secretsPolicy, metav1.GetOptions{}); err != nil {
		t.Fatalf("the ValidatingAdmissionPolicyBinding of manifests/rbac is not installed: %v", err)
	}
	cfg := rest.CopyConfig(s.Env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerUser}
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	secrets, asSecrets := s.Kube.CoreV1().Secrets(ns), as.CoreV1().Secrets(ns)
	denied := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), secretsPolicyDenied) {
			t.Errorf("%s as %s: %v, want forbidden by %s", what, controllerUser, err, secretsPolicyDenied)
			return
		}
		t.Logf("%s: %v", what, err)
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s as %s: %v, want allowed", what, controllerUser, err)
		}
	}

	// The cluster: the shared controller, as the ServiceAccount, creates
	// its Secrets under the policy.
	nc, err := s.Nats.ClusterV1beta1().NatsClusters(ns).Create(ctx, &clusterv1beta1.NatsCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns},
		Spec:       clusterv1beta1.NatsClusterSpec{Version: "2.15.2", Replicas: 1, LameDuck: framework.TestLameDuck()},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := render.OwnerReference(nc)

	// A user's Secret, and one a NatsCluster controls without the label
	// (as an older release's could be), both written by an administrator.
	users, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "app-credentials", Labels: map[string]string{clusterv1beta1.LabelManagedBy: clusterv1beta1.ManagedByValue}},
		StringData: map[string]string{"password": "hunter2"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	older, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-older", OwnerReferences: []metav1.OwnerReference{owner}},
		StringData: map[string]string{"k": "v"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The ClusterRole grants neither patch nor delete on Secrets (the
	// controller does neither; the garbage collector deletes them, as its
	// own user). Granted here, in this namespace only, so that the policy
	// is what refuses them below.
	_, err = asSecrets.Patch(ctx, "app-credentials", types.MergePatchType, []byte(`{"metadata":{"annotations":{"stolen":"yes"}}}`), metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) || strings.Contains(err.Error(), secretsPolicyDenied) {
		t.Errorf("patch of the user's Secret without a patch grant: %v, want forbidden by RBAC", err)
	}
	if err := asSecrets.Delete(ctx, "app-credentials", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) || strings.Contains(err.Error(), secretsPolicyDenied) {
		t.Errorf("delete of the user's Secret without a delete grant: %v, want forbidden by RBAC", err)
	}
	if _, err := s.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "patch-delete-secrets"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "patch-delete-secrets"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "patch-delete-secrets"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "nats-system", Name: "nats-operator"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A user's Secret (labelled as the controller's, but not controlled
	// by a NatsCluster): no update, patch or apply. kube-apiserver
	// enforces the policy about a second after it is created (with the
	// package stack, maybe just before this test), hence the wait, in dry
	// runs so that no update lands before.
	poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "the policy to refuse an update of a user's Secret, and the patch grant", func() error {
		u := users.DeepCopy()
		u.Data["password"] = []byte("stolen")
		_, err := asSecrets.Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), secretsPolicyDenied) {
			return fmt.Errorf("update (dry run) as %s: %v", controllerUser, err)
		}
		_, err = asSecrets.Patch(ctx, "app-credentials", types.MergePatchType, []byte(`{"metadata":{"annotations":{"stolen":"yes"}}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), secretsPolicyDenied) {
			return fmt.Errorf("patch (dry run) as %s: %v", controllerUser, err)
		}
		return nil
	})
	t.Logf("update and patch (dry runs) of user Secret %s/app-credentials refused by the policy %s after the test started", ns, time.Since(begin).Round(time.Millisecond))
	u := users.DeepCopy()
	u.Data["password"] = []byte("stolen")
	_, err = asSecrets.Update(ctx, u, metav1.UpdateOptions{})
	denied("update of the user's Secret", err)
	_, err = asSecrets.Patch(ctx, "app-credentials", types.MergePatchType, []byte(`{"metadata":{"annotations":{"stolen":"yes"}}}`), metav1.PatchOptions{})
	denied("merge patch of the user's Secret", err)
	out, err := s.Env.Kubectl("--as="+controllerUser, "-n", ns, "annotate", "secret", "app-credentials", "stolen=yes").CombinedOutput()
	if err == nil || !strings.Contains(string(out), secretsPolicyDenied) {
		t.Errorf("kubectl --as=%s annotate secret app-credentials: %v %s, want refused by %s", controllerUser, err, out, secretsPolicyDenied)
	} else {
		t.Logf("kubectl --as=%s annotate secret app-credentials: %s", controllerUser, strings.TrimSpace(string(out)))
	}
	got, err := secrets.Get(ctx, "app-credentials", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data["password"]) != "hunter2" || len(got.Annotations) > 0 {
		t.Errorf("the user's Secret changed: data %q annotations %v", got.Data, got.Annotations)
	}

	// Creates: only Opaque Secrets labelled and controlled by a
	// NatsCluster; not a service-account token, whatever its marks.
	marked := metav1.ObjectMeta{Labels: render.ClusterLabels("demo"), OwnerReferences: []metav1.OwnerReference{owner}}
	_, err = asSecrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unmarked"}}, metav1.CreateOptions{})
	denied("create of an unmarked Secret", err)
	unlabelled := marked.DeepCopy()
	unlabelled.Name, unlabelled.Labels = "unlabelled", nil
	_, err = asSecrets.Create(ctx, &corev1.Secret{ObjectMeta: *unlabelled}, metav1.CreateOptions{})
	denied("create of a Secret controlled by the NatsCluster without the managed-by label", err)
	token := marked.DeepCopy()
	token.Name, token.Annotations = "token", map[string]string{corev1.ServiceAccountNameKey: "default"}
	_, err = asSecrets.Create(ctx, &corev1.Secret{ObjectMeta: *token, Type: corev1.SecretTypeServiceAccountToken}, metav1.CreateOptions{})
	denied("create of a marked service-account token Secret", err)
	extra := marked.DeepCopy()
	extra.Name = "demo-extra"
	_, err = asSecrets.Create(ctx, &corev1.Secret{ObjectMeta: *extra, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	allowed("create of a marked Opaque Secret", err)

	// Updates of Secrets the NatsCluster controls: allowed, the label or
	// not; taking the Secret out of its control is not.
	o := older.DeepCopy()
	o.Data["k"] = []byte("updated")
	_, err = asSecrets.Update(ctx, o, metav1.UpdateOptions{})
	allowed("update of a Secret the NatsCluster controls, without the label", err)
	_, err = asSecrets.Patch(ctx, "demo-older", types.MergePatchType, []byte(`{"metadata":{"annotations":{"patched":"yes"}}}`), metav1.PatchOptions{})
	allowed("merge patch of a Secret the NatsCluster controls", err)
	_, err = asSecrets.Patch(ctx, "demo-older", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/ownerReferences"}]`), metav1.PatchOptions{})
	denied("removing the NatsCluster's ownerReference", err)

	// The controller's own Secrets: made by the shared controller under
	// the policy, and updatable by its ServiceAccount (a dry run, so the
	// controller's Secret stays as it made it).
	var own []corev1.Secret
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, "the controller to create the cluster's Secrets", func() error {
		list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: clusterv1beta1.LabelManagedBy + "=" + clusterv1beta1.ManagedByValue})
		if err != nil {
			return err
		}
		own = own[:0]
		names := map[string]bool{}
		for _, sec := range list.Items {
			if metav1.IsControlledBy(&sec, nc) && sec.Name != "demo-extra" {
				own = append(own, sec)
				names[sec.Name] = true
			}
		}
		for _, want := range []string{"demo-system-user", "demo-routes-ca", "demo-routes-tls"} {
			if !names[want] {
				return fmt.Errorf("no Secret %s yet (have %v)", want, names)
			}
		}
		return nil
	})
	for _, sec := range own {
		if sec.Type != corev1.SecretTypeOpaque {
			t.Errorf("the controller's Secret %s has type %s", sec.Name, sec.Type)
		}
		u := sec.DeepCopy()
		u.Annotations = map[string]string{"checked": "yes"}
		_, err := asSecrets.Update(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		allowed("update (dry run) of the controller's Secret "+sec.Name, err)
	}
	t.Logf("the controller created %d Secrets under the policy, each updatable by its ServiceAccount, %s after the test started", len(own), time.Since(begin).Round(time.Millisecond))

	// Deletes (granted in this namespace above): only of a Secret the
	// NatsCluster controls.
	err = asSecrets.Delete(ctx, "app-credentials", metav1.DeleteOptions{})
	denied("delete of the user's Secret", err)
	err = asSecrets.Delete(ctx, "demo-extra", metav1.DeleteOptions{})
	allowed("delete of a Secret the NatsCluster controls", err)
	if err := s.Kube.RbacV1().RoleBindings(ns).Delete(ctx, "patch-delete-secrets", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The cluster comes up; the controller wrote every Secret it needed.
	ready := s.WaitSettledUpToDate(ctx, t, ns, "demo", 3*time.Minute)
	t.Logf("cluster Ready and Settled %s after the test started: %s", time.Since(begin).Round(time.Millisecond), framework.Conditions(ready))
	log, err := os.ReadFile(s.Controller.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, secretsPolicy) {
			t.Errorf("the shared controller hit the Secrets policy: %s", l)
		}
	}
	if _, err := secrets.Get(ctx, "app-credentials", metav1.GetOptions{}); err != nil {
		t.Errorf("the user's Secret: %v", err)
	}
}
