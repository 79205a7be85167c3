package controller

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/pkg/render"
)

// DefaultControllerNamespace is the namespace the controller runs in unless
// told otherwise: the manifests install it there.
const DefaultControllerNamespace = render.DefaultControllerNamespace

// ensureNetworkPolicy creates, corrects or (with spec.networkPolicy.enabled
// false) deletes the cluster's NetworkPolicy. One of another owner in the
// way is never touched; nothing is done without a rendered target (a spec
// held InvalidSpec).
func (c *Controller) ensureNetworkPolicy(ctx context.Context, p *plan) error {
	if p.out == nil {
		return nil
	}
	nc, want, got := p.facts.nc, p.out.NetworkPolicy, p.facts.networkPolicy
	client := c.kubeClient.NetworkingV1().NetworkPolicies(nc.Namespace)
	switch {
	case want == nil && got == nil:
		return nil
	case got != nil && !metav1.IsControlledBy(got, nc):
		if want == nil {
			return nil
		}
		return &notControlledError{"NetworkPolicy", got.Namespace, got.Name}
	case want == nil:
		uid := got.UID
		err := client.Delete(ctx, got.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		c.countWrite("networkpolicies", "delete")
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return writeError("deleting", "NetworkPolicy", got, err)
		}
		klog.FromContext(ctx).V(2).Info("Deleted NetworkPolicy: spec.networkPolicy.enabled is false", "networkpolicy", klog.KObj(got))
		return nil
	case got == nil:
		_, err := client.Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
		c.countWrite("networkpolicies", "create")
		if apierrors.IsAlreadyExists(err) {
			return &notControlledError{"NetworkPolicy", want.Namespace, want.Name}
		}
		if err != nil {
			return writeError("creating", "NetworkPolicy", want, err)
		}
		klog.FromContext(ctx).V(2).Info("Created NetworkPolicy", "networkpolicy", klog.KObj(want))
		return nil
	}
	if apiequality.Semantic.DeepEqual(got.Labels, want.Labels) && apiequality.Semantic.DeepEqual(got.Spec, want.Spec) {
		return nil
	}
	updated := got.DeepCopy()
	updated.Labels = want.Labels
	updated.Spec = want.Spec
	_, err := client.Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
	c.countWrite("networkpolicies", "update")
	if err != nil {
		return writeError("updating", "NetworkPolicy", want, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated NetworkPolicy", "networkpolicy", klog.KObj(want))
	return nil
}

// ensurePodMonitor creates or corrects the cluster's PodMonitor where
// prometheus-operator's CRD is installed, and deletes it when metrics are
// turned off. Without the CRD, or without a dynamic client, it does nothing.
func (c *Controller) ensurePodMonitor(ctx context.Context, p *plan) error {
	if c.dynamic == nil || p.out == nil || !p.facts.podMonitorsServed {
		return nil
	}
	nc, want, got := p.facts.nc, p.out.PodMonitor, p.facts.podMonitor
	client := c.dynamic.Resource(podMonitors).Namespace(nc.Namespace)
	switch {
	case want == nil && got == nil:
		return nil
	case got != nil && !metav1.IsControlledBy(got, nc):
		if want == nil {
			return nil
		}
		return &notControlledError{"PodMonitor", got.GetNamespace(), got.GetName()}
	case want == nil:
		uid := got.GetUID()
		err := client.Delete(ctx, got.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		c.countWrite("podmonitors", "delete")
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return writeError("deleting", "PodMonitor", got, err)
		}
		return nil
	case got == nil:
		_, err := client.Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
		c.countWrite("podmonitors", "create")
		if err != nil {
			return writeError("creating", "PodMonitor", want, err)
		}
		klog.FromContext(ctx).V(2).Info("Created PodMonitor", "podmonitor", klog.KObj(want))
		return nil
	}
	gotSpec, _, _ := unstructured.NestedMap(got.Object, "spec")
	wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec")
	if specCovers(gotSpec, wantSpec) && apiequality.Semantic.DeepEqual(got.GetLabels(), want.GetLabels()) {
		return nil
	}
	updated := got.DeepCopy()
	updated.SetLabels(want.GetLabels())
	if err := unstructured.SetNestedMap(updated.Object, wantSpec, "spec"); err != nil {
		return err
	}
	_, err := client.Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
	c.countWrite("podmonitors", "update")
	if err != nil {
		return writeError("updating", "PodMonitor", want, err)
	}
	return nil
}
