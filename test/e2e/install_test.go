package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nats-operator/nats-operator/internal/image"
	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/internal/release"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// A release of this checkout (make release, without the kubectl-nats
// binaries: framework.BuildRelease) installs the controller as users
// install it: kubectl apply -f install.yaml, which the API server accepts
// in a server-side dry run first, runs its Deployment's pods from the
// release's image (its own layer, the digest install.yaml pins, the
// version the release set), with in-cluster config and only the
// permissions of manifests/rbac. One replica takes the Lease; both serve
// health and metrics; the controller creates the Services and the PDB of
// a new NatsCluster with owner references, fills status, brings it to
// Ready and Settled, and leaves the owned objects to the garbage collector
// when the cluster is deleted.
//
// Then, on the same control plane and node, the cluster-wide grant is
// removed (as a user moving to the namespaced install removes it) and the
// namespaced install (the release's install-namespaced.yaml, of
// manifests/namespaced: Roles in each watched namespace, --namespace a
// list) passes the same test for a cluster in the second of two
// namespaces, and never touches a cluster in a namespace it was not given.
func TestControllerInstallsWithLeastPrivilege(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	rel := framework.BuildRelease(ctx, t)
	checkReleaseBinary(t, rel)
	s := framework.StartStackWithoutController(ctx, t, localnode.Options{ImageArchives: map[string]string{framework.ControllerImage: rel.ImageArchive()}})
	if !t.Run("cluster-wide install", func(t *testing.T) { testInstall(ctx, t, s, rel, "apps", nil) }) {
		return
	}
	// The cluster-wide install goes: its Deployment (already scaled to 0)
	// and its ClusterRole and binding. What the namespaced install grants
	// is then all the controller has.
	kube := s.Kube
	if err := kube.AppsV1().Deployments("nats-system").Delete(ctx, "nats-operator", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.RbacV1().ClusterRoleBindings().Delete(ctx, "nats-operator", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.RbacV1().ClusterRoles().Delete(ctx, "nats-operator", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, time.Minute, 200*time.Millisecond, "the cluster-wide Deployment to be gone", func() error {
		if _, err := kube.AppsV1().Deployments("nats-system").Get(ctx, "nats-operator", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	t.Run("namespaced install", func(t *testing.T) { testInstall(ctx, t, s, rel, "team-b", []string{"nats", "team-b"}) })
}

// checkReleaseBinary checks what install.yaml names and what the release's
// image runs: the Deployment's image and its --job-image (the image of
// backup and restore Jobs) are the release's image pinned to the digest
// the archive holds, and the binary in the image, static, prints the
// release's version with --version.
func checkReleaseBinary(t *testing.T, rel *framework.Release) {
	for _, file := range []string{release.InstallFile, release.InstallNamespacedFile} {
		objs, err := testenv.ReadManifests(rel.Path(file))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
			c := d.Spec.Template.Spec.Containers[0]
			found = c.Image == rel.Reference && slices.Contains(c.Args, "--job-image="+rel.Reference)
			if !found {
				t.Errorf("%s: the Deployment runs %s with args %q; want %s, and as --job-image", file, c.Image, c.Args, rel.Reference)
			}
		}
		if !found {
			t.Errorf("%s names no Deployment of the release's image", file)
		}
	}
	dir := t.TempDir()
	img, err := image.Read(rel.ImageArchive(), filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	if err := image.Extract(img, filepath.Join(dir, "rootfs")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(dir, "rootfs", "nats-operator"), "--version").Output()
	want := "v" + framework.TestReleaseVersion + " (commit " + rel.Commit + ", go"
	if err != nil || !strings.HasPrefix(string(out), want) {
		t.Fatalf("nats-operator --version of the release's image: %q, %v; want it to start %q", out, err, want)
	}
	t.Logf("the release's binary: %s", strings.TrimSpace(string(out)))
}

func testInstall(ctx context.Context, t *testing.T, s *framework.Stack, rel *framework.Release, ns string, namespaces []string) {
	kube, nats := s.Kube, s.Nats

	begin := time.Now()
	if namespaces == nil {
		// A server-side dry run creates nothing, so the objects of
		// install.yaml in nats-system need the namespace made first.
		s.CreateNamespace(ctx, t, "nats-system")
		s.KubectlApplyFile(t, rel.Path(release.InstallFile), "--dry-run=server")
		s.KubectlApplyFile(t, rel.Path(release.InstallFile))
		s.CreateNamespace(ctx, t, ns)
	} else {
		s.CreateNamespace(ctx, t, "nats")
		s.KubectlApplyFile(t, rel.Path(release.InstallNamespacedFile), "--dry-run=server")
		objs, err := testenv.ReadManifests(rel.Path(release.InstallNamespacedFile))
		if err != nil {
			t.Fatal(err)
		}
		// The namespaces come with their Roles.
		if err := framework.ApplyObjects(ctx, s.Env.Config, "nats-system", framework.NamespacedInstallOf(t, objs, namespaces...)...); err != nil {
			t.Fatal(err)
		}
		s.CreateNamespace(ctx, t, "elsewhere")
		if _, err := nats.ClusterV1beta1().NatsClusters("elsewhere").Create(ctx, &clusterv1beta1.NatsCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "elsewhere"},
			Spec:       clusterv1beta1.NatsClusterSpec{Version: "2.15.2", Replicas: 3, LameDuck: framework.TestLameDuck()},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s.WaitControllerDeployment(ctx, t)
	s.CheckControllerImage(ctx, t, rel.Digest.String())
	leader := s.LeaderPod(ctx, t, "")
	t.Logf("controller Deployment Ready, pod %s leads, %s after the install", leader, time.Since(begin).Round(time.Millisecond))
	if want := `"Starting nats-operator" version="v` + framework.TestReleaseVersion + " (commit " + rel.Commit + ","; !strings.Contains(s.ControllerLog(leader), want) {
		t.Errorf("the leader's log does not hold %s: it runs another binary than the release's", want)
	}

	for _, name := range s.ControllerPodNames(ctx, t) {
		pod, err := kube.CoreV1().Pods("nats-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ip := pod.Status.PodIP
		poll.Eventually(t, time.Minute, 200*time.Millisecond, "/healthz, /readyz and the workqueue metrics of "+name, func() error {
			for _, p := range []string{"/healthz", "/readyz"} {
				code, body, err := framework.Get("http://" + ip + ":8081" + p)
				if err != nil || code != 200 {
					return fmt.Errorf("%s: %d %q %v", p, code, body, err)
				}
			}
			// HTTPS, the token reviewed by the API server: the install
			// lets the controller ask (manifests/rbac/metrics_auth.yaml).
			code, body, err := framework.GetWithToken("https://"+ip+":8080/metrics", s.Env.AdminToken)
			if err != nil || code != 200 {
				return fmt.Errorf("/metrics: %d %q %v", code, body, err)
			}
			if _, ok := framework.SumMetric(body, "workqueue_depth", `name="natscluster"`); !ok {
				return errors.New("workqueue_depth{name=\"natscluster\"} not exposed")
			}
			return nil
		})
	}
	t.Logf("Lease held, /healthz and /readyz 200, workqueue metrics exposed after %s", time.Since(begin).Round(time.Millisecond))
	nc, err := nats.ClusterV1beta1().NatsClusters(ns).Create(ctx, &clusterv1beta1.NatsCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns},
		Spec:       clusterv1beta1.NatsClusterSpec{Version: "2.15.2", Replicas: 3, LameDuck: framework.TestLameDuck()},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	owned := func(m metav1.Object) error {
		ref := metav1.GetControllerOf(m)
		if ref == nil || ref.UID != nc.UID || ref.Kind != "NatsCluster" {
			return fmt.Errorf("%s has controller reference %+v, want NatsCluster %s", m.GetName(), ref, nc.UID)
		}
		return nil
	}
	poll.Eventually(t, time.Minute, 200*time.Millisecond, "Services and PDB with owner references", func() error {
		for _, name := range []string{"demo", "demo-headless"} {
			svc, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := owned(svc); err != nil {
				return err
			}
		}
		pdb, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			return fmt.Errorf("PDB maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
		}
		if err := owned(pdb); err != nil {
			return err
		}
		return nil
	})
	poll.Eventually(t, time.Minute, 200*time.Millisecond, "status.endpoints and observedGeneration", func() error {
		got, err := nats.ClusterV1beta1().NatsClusters(ns).Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := got.Status
		if st.ObservedGeneration != got.Generation || st.Endpoints == nil ||
			st.Endpoints.Client != "nats://demo."+ns+".svc:4222" || st.Endpoints.Monitor != "http://demo-headless."+ns+".svc:8222" {
			return fmt.Errorf("status %+v endpoints %+v", st, st.Endpoints)
		}
		return nil
	})
	headless, _ := kube.CoreV1().Services(ns).Get(ctx, "demo-headless", metav1.GetOptions{})
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service: clusterIP %q publishNotReadyAddresses %v", headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}

	t.Logf("Services, PDB and status after %s", time.Since(begin).Round(time.Millisecond))
	if namespaces == nil {
		settled := s.WaitSettledUpToDate(ctx, t, ns, "demo", 3*time.Minute)
		t.Logf("Ready and Settled after %s: %s", time.Since(begin).Round(time.Millisecond), framework.Conditions(settled))
	}
	if err := nats.ClusterV1beta1().NatsClusters(ns).Delete(ctx, "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, time.Minute, 200*time.Millisecond, "the garbage collector to remove the owned objects", func() error {
		for _, name := range []string{"demo", "demo-headless"} {
			if _, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return errors.New("Service " + name + " still there")
			}
		}
		if _, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return errors.New("PDB still there")
		}
		return nil
	})

	t.Logf("garbage collected after %s", time.Since(begin).Round(time.Millisecond))
	if namespaces != nil {
		// Long after the watched cluster was served, the other is as it was
		// created: no status, no Services.
		other, err := nats.ClusterV1beta1().NatsClusters("elsewhere").Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if other.Status.ObservedGeneration != 0 || len(other.Status.Conditions) > 0 || len(other.Finalizers) > 0 {
			t.Errorf("the cluster in a namespace not watched was touched: finalizers %v status %+v", other.Finalizers, other.Status)
		}
		if svcs, err := kube.CoreV1().Services("elsewhere").List(ctx, metav1.ListOptions{}); err != nil || len(svcs.Items) > 0 {
			t.Errorf("Services in a namespace not watched: %v %v", svcs, err)
		}
	}
	// SIGTERM (the Deployment scaled to 0): the workers drain, then the
	// Lease is released (its holder cleared), so a standby takes over at
	// once instead of after it expires.
	pods := s.ControllerPodNames(ctx, t)
	if _, err := kube.AppsV1().Deployments("nats-system").Patch(ctx, "nats-operator", types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the controller pods to be gone", func() error {
		if left := s.ControllerPodNames(ctx, t); len(left) > 0 {
			return fmt.Errorf("pods %v", left)
		}
		return nil
	})
	lease, err := kube.CoordinationV1().Leases("nats-system").Get(ctx, "nats-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("after SIGTERM the Lease is still held by %q", *h)
	}
	log := s.ControllerLog(leader)
	drained, released := strings.Index(log, "Workers stopped"), strings.Index(log, "Stopped leading")
	if drained < 0 || released < 0 || drained > released {
		t.Errorf("want the workers drained (at %d) before the lease is released (at %d) on SIGTERM", drained, released)
	}

	// A permission missing from the install shows as a forbidden error in
	// the controller's log (informers that cannot list, events that cannot
	// be written); none may appear.
	s.CheckNoRBACDenial(t, pods...)
}
