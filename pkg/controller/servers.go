package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// createServers creates the ConfigMap and StatefulSet of the servers the
// decision names (servers without a StatefulSet), at the target. A server's
// existing objects are changed only by its own step, with one exception: the
// ConfigMap of a server without a StatefulSet (its creation was refused or
// cut short) runs no server, so it is brought to the target before the
// StatefulSet is created.
func (c *Controller) createServers(ctx context.Context, p *plan, names []string) error {
	f := p.facts
	for _, name := range names {
		i, ok := render.ServerOrdinal(f.nc.Name, name)
		if !ok || int(i) >= len(f.servers) || p.out == nil {
			return fmt.Errorf("planner asked to create unknown server %q", name)
		}
		so := f.servers[i]
		target := p.out.Servers[i]
		switch {
		case so.configMap == nil:
			if _, err := c.createConfigMap(ctx, target.ConfigMap); err != nil {
				return err
			}
		case so.statefulSet == nil && configMapDiffers(so.configMap, target.ConfigMap):
			if err := c.writeConfigMap(ctx, so.configMap, target.ConfigMap); err != nil {
				return err
			}
		}
		if so.statefulSet == nil {
			if _, err := c.createStatefulSet(ctx, target.StatefulSet); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Controller) createConfigMap(ctx context.Context, want *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	cm, err := c.kubeClient.CoreV1().ConfigMaps(want.Namespace).Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
	c.countWrite("configmaps", "create")
	if apierrors.IsAlreadyExists(err) {
		return nil, &notControlledError{"ConfigMap", want.Namespace, want.Name}
	}
	if err != nil {
		return nil, writeError("creating", "ConfigMap", want, err)
	}
	klog.FromContext(ctx).V(2).Info("Created ConfigMap", "configmap", klog.KObj(want))
	return cm, nil
}

func (c *Controller) createStatefulSet(ctx context.Context, want *appsv1.StatefulSet) (*appsv1.StatefulSet, error) {
	sts, err := c.kubeClient.AppsV1().StatefulSets(want.Namespace).Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
	c.countWrite("statefulsets", "create")
	if apierrors.IsAlreadyExists(err) {
		return nil, &notControlledError{"StatefulSet", want.Namespace, want.Name}
	}
	if err != nil {
		return nil, writeError("creating", "StatefulSet", want, err)
	}
	klog.FromContext(ctx).V(2).Info("Created StatefulSet", "statefulset", klog.KObj(want))
	return sts, nil
}

// stepStatefulSet returns the server's StatefulSet as its step writes it,
// nil when there is none yet or its template and labels already are the
// target's (and it runs). It is asked first in dry run: a template the API
// server refuses (an admission policy, a quota) is refused before the
// ConfigMap changes, so no server ever gets the new config under its old
// image and resources (the kubelet updates a mounted ConfigMap without a
// restart, and a crash would start on it).
func (c *Controller) stepStatefulSet(ctx context.Context, so *serverObjects, target *render.Server) (*appsv1.StatefulSet, error) {
	if so.statefulSet == nil || (apiequality.Semantic.DeepEqual(so.statefulSet.Spec.Template, target.StatefulSet.Spec.Template) &&
		apiequality.Semantic.DeepEqual(so.statefulSet.Labels, target.StatefulSet.Labels) && !stopped(so.statefulSet)) {
		return nil, nil
	}
	updated := so.statefulSet.DeepCopy()
	updated.Labels = target.StatefulSet.Labels
	updated.Spec.Template = target.StatefulSet.Spec.Template
	updated.Spec.UpdateStrategy = target.StatefulSet.Spec.UpdateStrategy
	// A server a scale-down stopped is started again.
	updated.Spec.Replicas = target.StatefulSet.Spec.Replicas
	_, err := c.kubeClient.AppsV1().StatefulSets(updated.Namespace).Update(ctx, updated,
		metav1.UpdateOptions{FieldManager: FieldManager, DryRun: []string{metav1.DryRunAll}})
	if err != nil && !dryRunUnsupported(err) {
		return nil, writeError("updating", "StatefulSet", updated, err)
	}
	return updated, nil
}

// restartServer moves one server to the target: its ConfigMap, then its
// StatefulSet template (updated, from stepStatefulSet); the StatefulSet
// controller replaces the pod. A pod
// still on another revision whose template already matched (a step cut
// short, or a pod the StatefulSet controller will not replace because it is
// not Ready) is deleted, with its UID as precondition, so a pod is never
// restarted twice by one step.
func (c *Controller) restartServer(ctx context.Context, so *serverObjects, target *render.Server, updated *appsv1.StatefulSet) error {
	revision := target.Revision
	logger := klog.FromContext(ctx)
	if so.configMap == nil || configMapDiffers(so.configMap, target.ConfigMap) {
		if err := c.writeConfigMap(ctx, so.configMap, target.ConfigMap); err != nil {
			return err
		}
	}
	if so.statefulSet == nil {
		if _, err := c.createStatefulSet(ctx, target.StatefulSet); err != nil {
			return err
		}
		return nil
	}
	if updated != nil {
		_, err := c.kubeClient.AppsV1().StatefulSets(updated.Namespace).Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
		c.countWrite("statefulsets", "update")
		if err != nil {
			return writeError("updating", "StatefulSet", updated, err)
		}
		logger.V(2).Info("Updated StatefulSet template", "statefulset", klog.KObj(updated), "revision", revision)
	}
	pod := so.pod
	if pod == nil || pod.DeletionTimestamp != nil ||
		(pod.Annotations[clusterv1beta1.AnnotationConfigRevision] == revision &&
			pod.Annotations[clusterv1beta1.AnnotationTemplateRevision] == target.TemplateRevision) {
		return nil
	}
	uid := pod.UID
	err := c.kubeClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	c.countWrite("pods", "delete")
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return nil // already replaced
	case err != nil:
		return writeError("deleting", "Pod", pod, err)
	}
	logger.V(2).Info("Deleted pod to restart it", "pod", klog.KObj(pod), "revision", revision)
	return nil
}

// configMapDiffers says whether a server's ConfigMap differs from the target
// in what the controller writes (data and labels).
func configMapDiffers(got, want *corev1.ConfigMap) bool {
	_, staged := got.Annotations[clusterv1beta1.AnnotationStagedFrom]
	return staged || !apiequality.Semantic.DeepEqual(got.Data, want.Data) || !apiequality.Semantic.DeepEqual(got.Labels, want.Labels)
}

func (c *Controller) writeConfigMap(ctx context.Context, got, want *corev1.ConfigMap) error {
	if got == nil {
		_, err := c.createConfigMap(ctx, want)
		return err
	}
	return c.updateConfigMap(ctx, got, want, "")
}

// updateConfigMap updates got to want's data, labels and route CA. stagedFrom
// is, for a config staged ahead of its server's reload, the config the
// server still runs (AnnotationStagedFrom); empty at the server's own step.
func (c *Controller) updateConfigMap(ctx context.Context, got, want *corev1.ConfigMap, stagedFrom string) error {
	updated := got.DeepCopy()
	updated.Labels = want.Labels
	updated.Data = want.Data
	// The route CA the server is given with this config (a step writes
	// it): what it will check new routes against.
	if ca, ok := want.Annotations[clusterv1beta1.AnnotationRoutesCA]; ok {
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[clusterv1beta1.AnnotationRoutesCA] = ca
	} else {
		delete(updated.Annotations, clusterv1beta1.AnnotationRoutesCA)
	}
	if stagedFrom != "" {
		if updated.Annotations == nil {
			updated.Annotations = map[string]string{}
		}
		updated.Annotations[clusterv1beta1.AnnotationStagedFrom] = stagedFrom
	} else {
		// Written at the server's own step: what it runs is this config
		// (or will be once it restarts or reloads), no longer a staged one.
		delete(updated.Annotations, clusterv1beta1.AnnotationStagedFrom)
	}
	_, err := c.kubeClient.CoreV1().ConfigMaps(updated.Namespace).Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
	c.countWrite("configmaps", "update")
	if err != nil {
		return writeError("updating", "ConfigMap", updated, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated ConfigMap", "configmap", klog.KObj(updated))
	return nil
}
