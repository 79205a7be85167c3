package controller

import (
	"context"
	"fmt"
	"time"

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

// runs says whether a server runs: its StatefulSet exists, is not stopped
// and has its pod. The template of a server that runs is written before its
// ConfigMap at its step (restart); one that does not gets its ConfigMap
// first, so the pod the StatefulSet controller creates starts on it.
func runs(so *serverObjects) bool {
	return so.statefulSet != nil && !stopped(so.statefulSet) && so.pod != nil
}

// updateTemplate writes the server's StatefulSet at the target's template,
// labels, update strategy and replicas (a server a scale-down stopped is
// started again); nothing when there is no StatefulSet or it already is
// (and runs).
func (c *Controller) updateTemplate(ctx context.Context, so *serverObjects, target *render.Server) error {
	if so.statefulSet == nil || (apiequality.Semantic.DeepEqual(so.statefulSet.Spec.Template, target.StatefulSet.Spec.Template) &&
		apiequality.Semantic.DeepEqual(so.statefulSet.Labels, target.StatefulSet.Labels) && !stopped(so.statefulSet)) {
		return nil
	}
	updated := so.statefulSet.DeepCopy()
	updated.Labels = target.StatefulSet.Labels
	updated.Spec.Template = target.StatefulSet.Spec.Template
	// Written with the template, so a StatefulSet an older release made
	// with RollingUpdate never has the new template under that strategy
	// (the StatefulSet controller would restart the pod before its
	// ConfigMap is written).
	updated.Spec.UpdateStrategy = target.StatefulSet.Spec.UpdateStrategy
	updated.Spec.Replicas = target.StatefulSet.Spec.Replicas
	_, err := c.kubeClient.AppsV1().StatefulSets(updated.Namespace).Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
	c.countWrite("statefulsets", "update")
	if err != nil {
		return writeError("updating", "StatefulSet", updated, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated StatefulSet template", "statefulset", klog.KObj(updated), "revision", target.Revision)
	return nil
}

// restartServer moves one server to the target at its step: its ConfigMap,
// then, for a server that does not run, its StatefulSet (the StatefulSet
// controller creates the pod from it); a server that runs had its template
// written already (restart). Then its pod is deleted, with its UID as
// precondition so a pod is never restarted twice by one step, unless it is
// already going or was started for this revision and template and no
// ConfigMap was written now (a step cut short after the deletion). A pod
// that was running when its ConfigMap was written runs the config before it,
// whatever its annotations say, and is deleted.
func (c *Controller) restartServer(ctx context.Context, so *serverObjects, target *render.Server) error {
	logger := klog.FromContext(ctx)
	wroteConfig := false
	if so.configMap == nil || configMapDiffers(so.configMap, target.ConfigMap) {
		if err := c.writeConfigMap(ctx, so.configMap, target.ConfigMap); err != nil {
			return err
		}
		wroteConfig = true
	}
	if so.statefulSet == nil {
		_, err := c.createStatefulSet(ctx, target.StatefulSet)
		return err
	}
	if !runs(so) {
		return c.updateTemplate(ctx, so, target)
	}
	pod := so.pod
	if so.podGoing || (!wroteConfig &&
		pod.Annotations[clusterv1beta1.AnnotationConfigRevision] == target.Revision &&
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
	c.gatherer.deletions.deleted(uid, time.Now())
	logger.V(2).Info("Deleted pod to restart it", "pod", klog.KObj(pod), "revision", target.Revision)
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
