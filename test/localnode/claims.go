package localnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// setUpClaim makes the directory behind a claim and binds the claim to a
// PersistentVolume made for it. The directory is keyed by namespace and
// claim name and outlives pods and nodes; a new claim of the same name (a
// new UID) starts from an empty directory, as a newly provisioned volume
// would.
func (n *Node) setUpClaim(ctx context.Context, ns, name string) error {
	claim, err := n.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		claim, err = n.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return errNotReady{fmt.Sprintf("persistentvolumeclaim %q not found", name)}
	}
	if err != nil {
		return err
	}
	if claim.DeletionTimestamp != nil {
		return errNotReady{fmt.Sprintf("persistentvolumeclaim %q is being deleted", name)}
	}
	dir := n.ClaimPath(ns, name)
	marker := filepath.Join(filepath.Dir(dir), "."+name+".uid")
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != string(claim.UID) {
		if err == nil {
			// Another claim of this name had the directory: start afresh.
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		if err := os.WriteFile(marker, []byte(claim.UID), 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	if claim.Status.Phase == corev1.ClaimBound {
		if wantsGrowth(claim) {
			// As the kubelet expands a volume at mount (resize.go).
			return n.growClaim(ctx, ns, name, true)
		}
		return nil
	}
	return n.bindClaim(ctx, claim, dir)
}

// bindClaim creates a hostPath PersistentVolume pre-bound to the claim, sets
// the claim's volumeName and marks both Bound. If the PV controller of
// kube-controller-manager runs, it finds them consistent.
func (n *Node) bindClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, dir string) error {
	pvName := "localnode-" + string(claim.UID)
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	modes := claim.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	class := ""
	if claim.Spec.StorageClassName != nil {
		class = *claim.Spec.StorageClassName
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Labels: map[string]string{nodeLabel: n.opts.NodeName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   modes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			VolumeMode:                    claim.Spec.VolumeMode,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir},
			},
		},
	}
	pvs := n.client.CoreV1().PersistentVolumes()
	if _, err := pvs.Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating PersistentVolume %s: %w", pvName, err)
	}
	claims := n.client.CoreV1().PersistentVolumeClaims(claim.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.UID != claim.UID {
			return nil
		}
		if c.Spec.VolumeName == "" {
			c.Spec.VolumeName = pvName
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
			if c, err = claims.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		if c.Status.Phase == corev1.ClaimBound {
			return nil
		}
		c.Status.Phase = corev1.ClaimBound
		c.Status.AccessModes = modes
		c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: size}
		_, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("binding PersistentVolumeClaim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pvs.Get(ctx, pvName, metav1.GetOptions{})
		if err != nil || p.Status.Phase == corev1.VolumeBound {
			return err
		}
		p.Status.Phase = corev1.VolumeBound
		_, err = pvs.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
}
