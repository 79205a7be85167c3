package render

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Shared are the objects every server of a cluster shares. They depend on
// the cluster's name alone, so the controller keeps them in place even while
// the spec cannot render (a missing or invalid trust).
type Shared struct {
	ClientService   *corev1.Service
	HeadlessService *corev1.Service
	PDB             *policyv1.PodDisruptionBudget
}

// SharedObjects renders the client Service, the headless Service and the
// PodDisruptionBudget of nc; Render returns the same objects.
func SharedObjects(nc *clusterv1beta1.NatsCluster) Shared {
	return Shared{ClientService: clientService(nc), HeadlessService: headlessService(nc), PDB: pdb(nc)}
}
