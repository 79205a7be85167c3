package localnode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// claimOf is a 1Gi ReadWriteOnce claim of a StorageClass ("" for none).
func claimOf(name, class string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// claimPod is a host-command pod mounting each claim at /<claim>.
func claimPod(name, command string, claims ...string) *corev1.Pod {
	return hostPod(name, func(s *corev1.PodSpec) {
		s.Containers[0].Command = []string{"sh", "-c", command}
		for _, c := range claims {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c},
			}})
			s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: c, MountPath: "/" + c})
		}
	})
}

// growTo sets a claim's storage request as a user editing it would.
func growTo(ctx context.Context, client kubernetes.Interface, ns, name, size string) (*corev1.PersistentVolumeClaim, error) {
	var out *corev1.PersistentVolumeClaim
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
		out, err = client.CoreV1().PersistentVolumeClaims(ns).Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// resizeState summarises what a watcher of a claim's resize sees. It leaves
// out the Unused condition, which kube-controller-manager's pvc-protection
// controller keeps (PersistentVolumeClaimUnusedSinceTime, beta in 1.37).
func resizeState(c *corev1.PersistentVolumeClaim) string {
	conds := []string{}
	for _, x := range c.Status.Conditions {
		if x.Type != corev1.PersistentVolumeClaimUnused {
			conds = append(conds, string(x.Type))
		}
	}
	capacity := c.Status.Capacity[corev1.ResourceStorage]
	return fmt.Sprintf("conditions=%v step=%q capacity=%s", conds, c.Status.AllocatedResourceStatuses[corev1.ResourceStorage], capacity.String())
}

func TestClaimsGrowInPlaceWhenTheirStorageClassAllowsExpansion(t *testing.T) {
	// kube-controller-manager too: its expand controller must step aside.
	env := testenv.Start(t, testenv.Options{ControllerManager: true, SkipCRDs: true})
	node := startNode(t, env, "localnode")
	client := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	ns := "resize"
	createNamespace(t, client, ns)
	poll.Eventually(t, 30*time.Second, 100*time.Millisecond, "default ServiceAccount", func() error {
		_, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	for name, allow := range map[string]bool{"expandable": true, "fixed": false} {
		_, err := client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
			ObjectMeta:           metav1.ObjectMeta{Name: name},
			Provisioner:          "localnode.nats-operator.io/hostpath",
			AllowVolumeExpansion: ptr.To(allow),
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*corev1.PersistentVolumeClaim{
		claimOf("data", "expandable"), claimOf("fixed", "fixed"), claimOf("plain", ""),
		claimOf("unbound", "expandable"), claimOf("offline", "expandable"),
	} {
		if _, err := client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*corev1.Pod{
		claimPod("app", "echo kept > /data/marker; exec sleep 1000", "data", "fixed", "plain"),
		claimPod("first", "exec sleep 1000", "offline"),
	} {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	getPod := func(name string) *corev1.Pod {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return p
	}
	getClaim := func(name string) *corev1.PersistentVolumeClaim {
		c, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	volumeSize := func(c *corev1.PersistentVolumeClaim) string {
		pv, err := client.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		q := pv.Spec.Capacity[corev1.ResourceStorage]
		return q.String()
	}
	poll.Eventually(t, 30*time.Second, 100*time.Millisecond, "pods Ready", func() error {
		for _, name := range []string{"app", "first"} {
			if p := getPod(name); !kubeutil.PodReady(p) {
				return fmt.Errorf("%s not Ready", name)
			}
		}
		return nil
	})

	t.Run("the API server refuses growth unless the claim is Bound and its class allows expansion", func(t *testing.T) {
		for _, name := range []string{"fixed", "plain"} {
			_, err := growTo(ctx, client, ns, name, "2Gi")
			want := fmt.Sprintf(`persistentvolumeclaims %q is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize`, name)
			if !apierrors.IsForbidden(err) || err == nil || err.Error() != want {
				t.Errorf("growing claim %s (class %q): %v, want Forbidden %q", name, *getClaim(name).Spec.StorageClassName, err, want)
			}
		}
		// Validation comes before the admission plugin (whose own message
		// is "Only bound persistent volume claims can be expanded").
		_, err := growTo(ctx, client, ns, "unbound", "2Gi")
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims") {
			t.Errorf("growing an unbound claim: %v", err)
		}
		for _, name := range []string{"fixed", "plain"} {
			if s := resizeState(getClaim(name)); s != `conditions=[] step="" capacity=1Gi` {
				t.Errorf("claim %s: %s", name, s)
			}
		}
	})

	t.Run("a claim in use grows online without restarting its pod", func(t *testing.T) {
		before := getPod("app")
		pid := node.ContainerPID(ns, "app", "main")
		claim, err := growTo(ctx, client, ns, "data", "2Gi")
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		w, err := client.CoreV1().PersistentVolumeClaims(ns).Watch(wctx, metav1.ListOptions{FieldSelector: "metadata.name=data", ResourceVersion: claim.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		begin := time.Now()
		var seen []string
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*corev1.PersistentVolumeClaim)
			if ev.Type != watch.Modified || !ok {
				t.Fatalf("watch event %s %T", ev.Type, ev.Object)
			}
			if s := resizeState(c); len(seen) == 0 || seen[len(seen)-1] != s {
				seen = append(seen, s)
			}
			if c.Status.Capacity.Storage().Cmp(resource.MustParse("2Gi")) == 0 {
				claim = c
				break
			}
		}
		t.Logf("status.capacity 2Gi %s after the edit; the claim's status went through:\n  %s", time.Since(begin).Round(time.Millisecond), strings.Join(seen, "\n  "))
		want := []string{
			`conditions=[Resizing] step="ControllerResizeInProgress" capacity=1Gi`,
			`conditions=[FileSystemResizePending] step="NodeResizePending" capacity=1Gi`,
			`conditions=[FileSystemResizePending] step="NodeResizeInProgress" capacity=1Gi`,
			`conditions=[] step="" capacity=2Gi`,
		}
		if strings.Join(seen, "\n") != strings.Join(want, "\n") {
			t.Errorf("status sequence:\n  %s\nwant:\n  %s", strings.Join(seen, "\n  "), strings.Join(want, "\n  "))
		}
		if got := claim.Status.AllocatedResources[corev1.ResourceStorage]; got.String() != "2Gi" {
			t.Errorf("allocatedResources.storage %s, want 2Gi", got.String())
		}
		if got := volumeSize(claim); got != "2Gi" {
			t.Errorf("PersistentVolume %s capacity %s, want 2Gi", claim.Spec.VolumeName, got)
		}
		after := getPod("app")
		if after == nil || after.UID != before.UID || !kubeutil.PodReady(after) || after.Status.ContainerStatuses[0].RestartCount != 0 || node.ContainerPID(ns, "app", "main") != pid {
			t.Errorf("pod app was disturbed: before uid %s pid %d, after %+v pid %d", before.UID, pid, after, node.ContainerPID(ns, "app", "main"))
		}
		if b, err := os.ReadFile(filepath.Join(node.ClaimPath(ns, "data"), "marker")); err != nil || string(b) != "kept\n" {
			t.Errorf("the claim's data: %q, %v", b, err)
		}
	})

	t.Run("a claim no pod uses waits for the node and grows when the next pod mounts it", func(t *testing.T) {
		if err := client.CoreV1().Pods(ns).Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, 30*time.Second, 100*time.Millisecond, "pod first gone", func() error {
			if getPod("first") != nil {
				return fmt.Errorf("still there")
			}
			return nil
		})
		if _, err := growTo(ctx, client, ns, "offline", "2Gi"); err != nil {
			t.Fatal(err)
		}
		pending := `conditions=[FileSystemResizePending] step="NodeResizePending" capacity=1Gi`
		poll.Eventually(t, 30*time.Second, 100*time.Millisecond, "file system resize pending", func() error {
			c := getClaim("offline")
			if s := resizeState(c); s != pending || volumeSize(c) != "2Gi" {
				return fmt.Errorf("%s, volume %s", s, volumeSize(c))
			}
			return nil
		})
		// kube-controller-manager's expand controller has seen the claim
		// (request above capacity) and left it to an external resizer.
		poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "the expand controller's ExternalExpanding event", func() error {
			evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=offline"})
			if err != nil {
				return err
			}
			var got []string
			for _, e := range evs.Items {
				if e.Source.Component == "volume_expand" && e.Reason == "ExternalExpanding" && e.Message == "waiting for an external controller to expand this PVC" {
					return nil
				}
				got = append(got, e.Reason+": "+e.Message)
			}
			return fmt.Errorf("events %q", got)
		})
		c := getClaim("offline")
		var msg string
		for _, x := range c.Status.Conditions {
			if x.Type == corev1.PersistentVolumeClaimFileSystemResizePending {
				msg = x.Message
			}
		}
		if s := resizeState(c); s != pending || msg != "Waiting for user to (re-)start a pod to finish file system resize of volume on node." {
			t.Errorf("after the expand controller: %s, %+v", s, c.Status.Conditions)
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, claimPod("second", "exec sleep 1000", "offline"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, 30*time.Second, 100*time.Millisecond, "pod second Ready", func() error {
			if !kubeutil.PodReady(getPod("second")) {
				return fmt.Errorf("not Ready")
			}
			return nil
		})
		if s := resizeState(getClaim("offline")); s != `conditions=[] step="" capacity=2Gi` {
			t.Errorf("once pod second runs: %s", s)
		}
	})
}
