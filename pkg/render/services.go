package render

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

func configMap(nc *clusterv1beta1.NatsCluster, ordinal int32, config []byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: objectMeta(nc, ConfigMapName(nc.Name, ordinal), ServerLabels(nc.Name, ordinal)),
		Data:       map[string]string{ConfigKey: string(config)},
	}
}

func servicePort(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromString(name), Protocol: corev1.ProtocolTCP}
}

// clientService is the cluster's client Service "demo" (port 4222).
func clientService(nc *clusterv1beta1.NatsCluster) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(nc, ClientServiceName(nc.Name), ClusterLabels(nc.Name)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: ClusterSelector(nc.Name),
			Ports:    append([]corev1.ServicePort{servicePort(ClientPortName, ClientPort)}, listenerServicePorts(&nc.Spec)...),
		},
	}
}

// headlessService is "demo-headless": every port, no cluster IP, and the
// addresses of pods that are not ready, so routes form before readiness.
func headlessService(nc *clusterv1beta1.NatsCluster) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(nc, HeadlessServiceName(nc.Name), ClusterLabels(nc.Name)),
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 ClusterSelector(nc.Name),
			Ports:                    headlessPorts(&nc.Spec),
		},
	}
}

// headlessPorts are every server port, and the exporter's when it runs.
func headlessPorts(spec *clusterv1beta1.NatsClusterSpec) []corev1.ServicePort {
	ports := []corev1.ServicePort{
		servicePort(ClientPortName, ClientPort),
		servicePort(ClusterPortName, ClusterPort),
		servicePort(MonitorPortName, MonitorPort),
	}
	if spec.Gateway != nil {
		ports = append(ports, servicePort(GatewayPortName, GatewayPort))
	}
	if spec.LeafNodes != nil && spec.LeafNodes.Accept {
		ports = append(ports, servicePort(LeafNodePortName, LeafNodePort))
	}
	ports = append(ports, listenerServicePorts(spec)...)
	if spec.Metrics.IsEnabled() {
		ports = append(ports, servicePort(MetricsPortName, MetricsPort))
	}
	return ports
}

// pdb lets at most one server be disrupted at a time.
func pdb(nc *clusterv1beta1.NatsCluster) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: objectMeta(nc, PDBName(nc.Name), ClusterLabels(nc.Name)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &one,
			Selector:       &metav1.LabelSelector{MatchLabels: ClusterSelector(nc.Name)},
		},
	}
}
