package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/image"
	"github.com/nats-operator/nats-operator/internal/kubeutil"
	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// ControllerImage is the image of manifests/controller/operator.yaml.
const ControllerImage = image.Repository

// ControllerImages maps ControllerImage to the controller binary built
// from this checkout, for localnode.Options.Images: the node then runs the
// Deployment's pods as users' clusters run the image.
func ControllerImages(t testing.TB) map[string]string {
	return map[string]string{ControllerImage: ControllerBinary(t)}
}

var (
	imageOnce   sync.Once
	imageFile   string
	imageDigest string
	imageErr    error
)

// ControllerImageArchive makes, once per test process, the controller's
// image (internal/image, as make image does) around ControllerBinary, and
// returns the OCI image archive and the image's digest.
func ControllerImageArchive(t testing.TB) (file, digest string) {
	t.Helper()
	bin := ControllerBinary(t)
	imageOnce.Do(func() {
		img, err := image.Build(image.Options{Binary: bin, Version: "dev"})
		if err != nil {
			imageErr = err
			return
		}
		f := filepath.Join(filepath.Dir(bin), "nats-operator-image.tar")
		d, err := image.WriteArchive(f, img, "dev")
		imageFile, imageDigest, imageErr = f, d.String(), err
	})
	if imageErr != nil {
		t.Fatalf("making the controller's image: %v", imageErr)
	}
	return imageFile, imageDigest
}

// ControllerImageArchives maps ControllerImage to ControllerImageArchive,
// for localnode.Options.ImageArchives: the node then runs the Deployment's
// pods from the image's own layer, the binary at /nats-operator in it.
func ControllerImageArchives(t testing.TB) map[string]string {
	t.Helper()
	file, digest := ControllerImageArchive(t)
	t.Logf("the controller's image: %s@%s (%s)", ControllerImage, digest, file)
	return map[string]string{ControllerImage: file}
}

// CheckControllerImage fails t unless every controller pod reports
// running the image of digest (its imageID), from the image's own layer.
func (s *Stack) CheckControllerImage(ctx context.Context, t testing.TB, digest string) {
	t.Helper()
	list, err := s.Kube.CoreV1().Pods("nats-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nats-operator"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		t.Fatal("no controller pod")
	}
	for _, p := range list.Items {
		for _, c := range p.Status.ContainerStatuses {
			if want := ControllerImage + "@" + digest; c.ImageID != want {
				t.Errorf("controller pod %s runs image %s (%s), want %s", p.Name, c.Image, c.ImageID, want)
			}
		}
	}
}

// KubectlApplyFile runs kubectl apply -f file as an administrator, with
// extra flags (--dry-run=server).
func (s *Stack) KubectlApplyFile(t testing.TB, file string, flags ...string) {
	t.Helper()
	args := append([]string{"apply", "-f", file}, flags...)
	if out, err := s.Env.Kubectl(args...).CombinedOutput(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// KubectlApplyK runs kubectl apply -k manifests/<dir> as an administrator.
func (s *Stack) KubectlApplyK(t testing.TB, dir string) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Env.Kubectl("apply", "-k", filepath.Join(root, "manifests", dir)).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -k manifests/%s: %v\n%s", dir, err, out)
	}
}

// NamespacedInstall is what kubectl kustomize manifests/namespaced renders,
// made for namespaces as its README says: the watched namespace's objects
// (the Namespace nats, its Role and RoleBinding) repeated for each, and
// the Deployment's --namespace listing them.
func NamespacedInstall(t testing.TB, env *testenv.Env, namespaces ...string) []*unstructured.Unstructured {
	t.Helper()
	return NamespacedInstallOf(t, Kustomize(t, env, "namespaced"), namespaces...)
}

// NamespacedInstallOf is NamespacedInstall of the objects of a rendering
// of manifests/namespaced (a release's install-namespaced.yaml).
func NamespacedInstallOf(t testing.TB, objs []*unstructured.Unstructured, namespaces ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "Namespace" && o.GetName() == "nats", o.GetNamespace() == "nats":
			for _, ns := range namespaces {
				c := o.DeepCopy()
				if c.GetKind() == "Namespace" {
					c.SetName(ns)
				} else {
					c.SetNamespace(ns)
				}
				out = append(out, c)
			}
		case o.GetKind() == "Deployment":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			args := c["args"].([]any)
			for i, a := range args {
				if strings.HasPrefix(a.(string), "--namespace=") {
					args[i] = "--namespace=" + strings.Join(namespaces, ",")
				}
			}
			c["args"] = args
			if err := unstructured.SetNestedSlice(o.Object, containers, "spec", "template", "spec", "containers"); err != nil {
				t.Fatal(err)
			}
			out = append(out, o)
		default:
			out = append(out, o)
		}
	}
	return out
}

// Kustomize returns the objects kubectl kustomize renders of
// manifests/<dir> ("" for manifests/ itself).
func Kustomize(t testing.TB, env *testenv.Env, dir string) []*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := env.Kubectl("kustomize", filepath.Join(root, "manifests", dir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize manifests/%s: %v", dir, err)
	}
	f := filepath.Join(t.TempDir(), "kustomized.yaml")
	if err := os.WriteFile(f, out, 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := testenv.ReadManifests(f)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// WaitControllerDeployment waits until the controller's Deployment has
// every replica updated and Ready.
func (s *Stack) WaitControllerDeployment(ctx context.Context, t testing.TB) {
	t.Helper()
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, "the controller Deployment to be Ready", func() error {
		d, err := s.Kube.AppsV1().Deployments("nats-system").Get(ctx, "nats-operator", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if want := *d.Spec.Replicas; d.Status.ReadyReplicas != want || d.Status.UpdatedReplicas != want {
			return fmt.Errorf("ready %d updated %d of %d; %s", d.Status.ReadyReplicas, d.Status.UpdatedReplicas, want, s.controllerPods(ctx))
		}
		return nil
	})
}

// LeaderPod waits for the Lease to be held by a controller pod other than
// not, and returns the pod's name (the identity is <pod>_<pid>).
func (s *Stack) LeaderPod(ctx context.Context, t testing.TB, not string) string {
	t.Helper()
	var holder string
	poll.Eventually(t, time.Minute, 100*time.Millisecond, "a controller pod to hold the Lease", func() error {
		lease, err := s.Kube.CoordinationV1().Leases("nats-system").Get(ctx, "nats-operator", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return errors.New("no holder")
		}
		pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
		if pod == not {
			return fmt.Errorf("still held by %s", *lease.Spec.HolderIdentity)
		}
		p, err := s.Kube.CoreV1().Pods("nats-system").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("holder %q: %w", *lease.Spec.HolderIdentity, err)
		}
		if p.Labels["app.kubernetes.io/name"] != "nats-operator" {
			return fmt.Errorf("holder %q is not a controller pod", *lease.Spec.HolderIdentity)
		}
		holder = pod
		return nil
	})
	return holder
}

// ControllerLog is the log of a controller pod's container (kept after the
// pod is gone).
func (s *Stack) ControllerLog(pod string) string {
	b, _ := os.ReadFile(s.Node.ContainerLogPath("nats-system", pod, "nats-operator"))
	return string(b)
}

// CheckNoRBACDenial fails t for every line of the controller pods' logs
// that reports a forbidden request: a permission missing from the install.
func (s *Stack) CheckNoRBACDenial(t testing.TB, pods ...string) {
	t.Helper()
	for _, pod := range pods {
		for _, l := range strings.Split(s.ControllerLog(pod), "\n") {
			if strings.Contains(l, "forbidden") {
				t.Errorf("controller pod %s hit an RBAC denial: %s", pod, l)
			}
		}
	}
}

// ControllerPodNames lists the controller's pods.
func (s *Stack) ControllerPodNames(ctx context.Context, t testing.TB) []string {
	t.Helper()
	list, err := s.Kube.CoreV1().Pods("nats-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nats-operator"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// controllerPods describes the controller's pods in one line.
func (s *Stack) controllerPods(ctx context.Context) string {
	list, err := s.Kube.CoreV1().Pods("nats-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range list.Items {
		d := fmt.Sprintf("%s %s ready=%v", p.Name, p.Status.Phase, kubeutil.PodReady(&p))
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil {
				d += " " + w.Reason + ": " + w.Message
			}
		}
		out = append(out, d)
	}
	return strings.Join(out, "; ")
}
