package render

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// NamespaceNameLabel is the label the API server sets on every namespace
// to its name.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// ControllerPodLabels are the labels of the controller's pods
// (manifests/controller/operator.yaml): the NetworkPolicy admits them, in
// the controller's namespace, to the client and monitoring ports.
var ControllerPodLabels = map[string]string{"app.kubernetes.io/name": "nats-operator"}

// LabelJobOf is the label, set to the cluster's name, of the pods of the
// backup and restore Jobs the controller runs against a cluster
// (pkg/controller/backups: NatsBackups, NatsRestores, and those of a
// JetStream migration). The pods carry no label of the cluster itself
// (cluster.nats-operator.io/cluster selects its servers).
const LabelJobOf = "cluster.nats-operator.io/job-of"

// JobPodLabels are the labels of the pods of the cluster's backup and
// restore Jobs that the NetworkPolicy selects to admit them to the client
// port: the controller's managed-by label and LabelJobOf.
func JobPodLabels(cluster string) map[string]string {
	return map[string]string{
		clusterv1beta1.LabelManagedBy: clusterv1beta1.ManagedByValue,
		LabelJobOf:                    cluster,
	}
}

// NetworkPolicy is the NetworkPolicy <name> of the cluster's pods, nil with
// spec.networkPolicy.enabled false. Closed by default, it admits each port
// from who connects to it, each peer in a rule of its own:
//   - the client port, and the WebSocket and MQTT ports with spec.websocket
//     and spec.mqtt, from clientsFrom, by default the pods of the cluster's
//     own namespace;
//   - the client port, whatever clientsFrom says, from the controller's
//     pods (ControllerPodLabels in the controller's namespace), which dial
//     each server's pod IP there for every $SYS request: reloads,
//     evacuation, peer removal, meta leader step-down, replacing a server,
//     asking a supercluster's remote meta leader (pkg/observe System);
//   - the client port, whatever clientsFrom says, from the pods of the
//     cluster's own backup and restore Jobs (JobPodLabels in the cluster's
//     namespace: NatsBackup, NatsRestore and JetStream migration Jobs),
//     which dial the servers' client port only. Neither the controller nor
//     the Jobs dial the WebSocket or MQTT port;
//   - the route port from the cluster's own servers only: nothing else
//     dials it, the controller neither;
//   - the monitoring port from the controller's pods only, which ask each
//     server's pod IP there directly (pkg/observe), not through the API
//     server; the exporter sidecar reads it over localhost, and the
//     kubelet's probes come from the pod's node, whose traffic to its
//     pods network plugins do not filter; the Jobs never ask it;
//   - the gateway port, with spec.gateway, from anywhere (the other
//     clusters of the supercluster), and the leaf port, with
//     spec.leafnodes.accept, from anywhere (leaf clusters);
//   - the metrics port, when the exporter runs, from metricsFrom only:
//     with none, no rule, so nobody.
//
// It selects ingress only: the servers' own connections out are not
// filtered.
func NetworkPolicy(nc *clusterv1beta1.NatsCluster, controllerNamespace string) *networkingv1.NetworkPolicy {
	spec := &nc.Spec
	if !spec.NetworkPolicy.IsEnabled() {
		return nil
	}
	tcp := corev1.ProtocolTCP
	port := func(name string) []networkingv1.NetworkPolicyPort {
		p := intstr.FromString(name)
		return []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}}
	}
	clients := peers(spec.NetworkPolicy.ClientsFrom)
	if len(clients) == 0 {
		clients = []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: nc.Namespace}},
		}}
	}
	// The controller: one peer, namespace and pods, so both must match.
	controller := func() []networkingv1.NetworkPolicyPeer {
		return []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: controllerNamespace}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(ControllerPodLabels)},
		}}
	}
	rules := []networkingv1.NetworkPolicyIngressRule{
		{Ports: append(port(ClientPortName), listenerPolicyPorts(spec)...), From: clients},
		{Ports: port(ClientPortName), From: controller()},
		// A pod selector alone selects in the policy's namespace, the
		// cluster's, where the Jobs run.
		{Ports: port(ClientPortName), From: []networkingv1.NetworkPolicyPeer{{
			PodSelector: &metav1.LabelSelector{MatchLabels: JobPodLabels(nc.Name)},
		}}},
		{Ports: port(ClusterPortName), From: []networkingv1.NetworkPolicyPeer{{
			PodSelector: &metav1.LabelSelector{MatchLabels: ClusterSelector(nc.Name)},
		}}},
		{Ports: port(MonitorPortName), From: controller()},
	}
	if spec.Gateway != nil {
		// Other clusters of the supercluster may run in any namespace or
		// outside this Kubernetes cluster.
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: port(GatewayPortName)})
	}
	if spec.LeafNodes != nil && spec.LeafNodes.Accept {
		// Leaf clusters connect from anywhere, the edge included.
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: port(LeafNodePortName)})
	}
	if from := peers(spec.NetworkPolicy.MetricsFrom); spec.Metrics.IsEnabled() && len(from) > 0 {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: port(MetricsPortName), From: from})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: objectMeta(nc, nc.Name, ClusterLabels(nc.Name)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: ClusterSelector(nc.Name)},
			Ingress:     rules,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
}

// PodMonitor API of prometheus-operator.
const (
	PodMonitorGroup    = "monitoring.coreos.com"
	PodMonitorVersion  = "v1"
	PodMonitorResource = "podmonitors"
	PodMonitorKind     = "PodMonitor"
)

// PodMonitor is the prometheus-operator PodMonitor <name> that scrapes every
// server's exporter on its metrics port, nil with spec.metrics.enabled
// false. The controller writes it only where its CRD is installed.
func PodMonitor(nc *clusterv1beta1.NatsCluster) *unstructured.Unstructured {
	if !nc.Spec.Metrics.IsEnabled() {
		return nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": stringMap(ClusterSelector(nc.Name))},
			"namespaceSelector": map[string]any{
				"matchNames": []any{nc.Namespace},
			},
			"podMetricsEndpoints": []any{map[string]any{
				"port": MetricsPortName,
				"path": "/metrics",
			}},
		},
	}}
	u.SetAPIVersion(PodMonitorGroup + "/" + PodMonitorVersion)
	u.SetKind(PodMonitorKind)
	meta := objectMeta(nc, nc.Name, ClusterLabels(nc.Name))
	u.SetName(meta.Name)
	u.SetNamespace(meta.Namespace)
	u.SetLabels(meta.Labels)
	u.SetOwnerReferences(meta.OwnerReferences)
	return u
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// peers copies a list of NetworkPolicy peers.
func peers(in []networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer {
	var out []networkingv1.NetworkPolicyPeer
	for _, p := range in {
		out = append(out, *p.DeepCopy())
	}
	return out
}
