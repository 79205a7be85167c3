package controller

// TEMPORARY until pkg/render lands: the shared objects of a NatsCluster.

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

type shared struct {
	ClientService, HeadlessService *corev1.Service
	PDB                            *policyv1.PodDisruptionBudget
}

func sharedObjects(nc *clusterv1beta1.NatsCluster) shared {
	lbl := map[string]string{
		clusterv1beta1.LabelName: "nats", clusterv1beta1.LabelInstance: nc.Name,
		clusterv1beta1.LabelManagedBy: clusterv1beta1.ManagedByValue, clusterv1beta1.LabelCluster: nc.Name,
	}
	sel := map[string]string{clusterv1beta1.LabelCluster: nc.Name}
	om := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: nc.Namespace, Labels: lbl,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(nc, clusterv1beta1.SchemeGroupVersion.WithKind("NatsCluster"))}}
	}
	port := func(n string, p int32) corev1.ServicePort {
		return corev1.ServicePort{Name: n, Port: p, TargetPort: intstr.FromString(n), Protocol: corev1.ProtocolTCP}
	}
	one := intstr.FromInt32(1)
	return shared{
		ClientService: &corev1.Service{ObjectMeta: om(nc.Name), Spec: corev1.ServiceSpec{
			Selector: sel, Ports: []corev1.ServicePort{port("client", 4222)}}},
		HeadlessService: &corev1.Service{ObjectMeta: om(nc.Name + "-headless"), Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone, Selector: sel, PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{port("client", 4222), port("cluster", 6222), port("monitor", 8222)}}},
		PDB: &policyv1.PodDisruptionBudget{ObjectMeta: om(nc.Name), Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: sel}}},
	}
}
