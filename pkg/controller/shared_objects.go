package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// sharedObjects are the client Service, the headless Service and the PDB as
// the caches hold them; nil when absent.
type sharedObjects struct {
	clientService, headlessService *corev1.Service
	pdb                            *policyv1.PodDisruptionBudget
}

// ensureSharedObjects creates or corrects the client Service, the headless
// Service and the PodDisruptionBudget of a NatsCluster.
func (c *Controller) ensureSharedObjects(ctx context.Context, p *plan) error {
	nc, got := p.facts.nc, p.facts.shared
	shared := render.SharedObjects(nc)
	if err := c.ensureService(ctx, nc, got.clientService, shared.ClientService); err != nil {
		return err
	}
	if err := c.ensureService(ctx, nc, got.headlessService, shared.HeadlessService); err != nil {
		return err
	}
	return c.ensurePDB(ctx, nc, got.pdb, shared.PDB)
}

func (c *Controller) ensureService(ctx context.Context, nc *clusterv1beta1.NatsCluster, got, want *corev1.Service) error {
	if got == nil {
		_, err := c.kubeClient.CoreV1().Services(want.Namespace).Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
		c.countWrite("services", "create")
		if apierrors.IsAlreadyExists(err) {
			return &notControlledError{"Service", want.Namespace, want.Name}
		}
		if err != nil {
			return writeError("creating", "Service", want, err)
		}
		klog.FromContext(ctx).V(2).Info("Created Service", "service", klog.KObj(want))
		return nil
	}
	if !metav1.IsControlledBy(got, nc) {
		return &notControlledError{"Service", got.Namespace, got.Name}
	}
	if apiequality.Semantic.DeepEqual(got.Labels, want.Labels) &&
		apiequality.Semantic.DeepEqual(got.Spec.Ports, want.Spec.Ports) &&
		apiequality.Semantic.DeepEqual(got.Spec.Selector, want.Spec.Selector) &&
		got.Spec.PublishNotReadyAddresses == want.Spec.PublishNotReadyAddresses {
		return nil
	}
	updated := got.DeepCopy()
	updated.Labels = want.Labels
	updated.Spec.Ports = want.Spec.Ports
	updated.Spec.Selector = want.Spec.Selector
	updated.Spec.PublishNotReadyAddresses = want.Spec.PublishNotReadyAddresses
	_, err := c.kubeClient.CoreV1().Services(want.Namespace).Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
	c.countWrite("services", "update")
	if err != nil {
		return writeError("updating", "Service", want, err)
	}
	klog.FromContext(ctx).V(2).Info("Updated Service", "service", klog.KObj(want))
	return nil
}

func (c *Controller) ensurePDB(ctx context.Context, nc *clusterv1beta1.NatsCluster, got, want *policyv1.PodDisruptionBudget) error {
	if got == nil {
		_, err := c.kubeClient.PolicyV1().PodDisruptionBudgets(want.Namespace).Create(ctx, want, metav1.CreateOptions{FieldManager: FieldManager})
		c.countWrite("poddisruptionbudgets", "create")
		if apierrors.IsAlreadyExists(err) {
			return &notControlledError{"PodDisruptionBudget", want.Namespace, want.Name}
		}
		if err != nil {
			return writeError("creating", "PodDisruptionBudget", want, err)
		}
		klog.FromContext(ctx).V(2).Info("Created PodDisruptionBudget", "pdb", klog.KObj(want))
		return nil
	}
	if !metav1.IsControlledBy(got, nc) {
		return &notControlledError{"PodDisruptionBudget", got.Namespace, got.Name}
	}
	if apiequality.Semantic.DeepEqual(got.Labels, want.Labels) && apiequality.Semantic.DeepEqual(got.Spec, want.Spec) {
		return nil
	}
	updated := got.DeepCopy()
	updated.Labels = want.Labels
	updated.Spec = want.Spec
	_, err := c.kubeClient.PolicyV1().PodDisruptionBudgets(want.Namespace).Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager})
	c.countWrite("poddisruptionbudgets", "update")
	if err != nil {
		return writeError("updating", "PodDisruptionBudget", want, err)
	}
	return nil
}
