package render

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Ports of every server.
const (
	ClientPort  int32 = 4222
	ClusterPort int32 = 6222
	MonitorPort int32 = 8222

	ClientPortName  = "client"
	ClusterPortName = "cluster"
	MonitorPortName = "monitor"

	// MetricsPort is the exporter sidecar's Prometheus port.
	MetricsPort     int32 = 7777
	MetricsPortName       = "metrics"
	// ExporterContainerName is the exporter sidecar's container.
	ExporterContainerName = "metrics"
)

// Container, volumes and paths of every server's pod.
const (
	ContainerName = "nats"
	// ServerBinary is where the official nats image keeps nats-server.
	ServerBinary = "/nats-server"

	ConfigVolumeName = "config"
	ConfigDir        = "/etc/nats-config"
	// ConfigKey is the key of nats.conf in each server's ConfigMap.
	ConfigKey  = "nats.conf"
	ConfigPath = ConfigDir + "/" + ConfigKey

	// DataVolumeName is the data volume, and the name of the claim template
	// (so a server's PVC is data-<server>-0).
	DataVolumeName    = "data"
	DataDir           = "/data"
	JetStreamStoreDir = DataDir + "/jetstream"
	ResolverDir       = DataDir + "/resolver"
	// MemoryResolver is resolver.type of spec.auth.resolver Memory (and
	// Facts.Resolver): nats-server's MEM resolver, which keeps only the
	// preloaded accounts and has no directory.
	MemoryResolver = "mem"

	PidVolumeName = "pid"
	PidDir        = "/var/run/nats"
	PidFile       = PidDir + "/nats.pid"
)

// ServerName is the name of the server with this ordinal, and of its
// StatefulSet: ServerName("demo", 0) = "demo-0".
func ServerName(cluster string, ordinal int32) string {
	return cluster + "-" + strconv.Itoa(int(ordinal))
}

// StatefulSetName is the name of a server's StatefulSet, its server name.
func StatefulSetName(cluster string, ordinal int32) string {
	return ServerName(cluster, ordinal)
}

// PodName is the name of a server's only pod: PodName("demo", 0) = "demo-0-0".
func PodName(cluster string, ordinal int32) string {
	return ServerName(cluster, ordinal) + "-0"
}

// ConfigMapName is the name of a server's ConfigMap: "demo-0-config".
func ConfigMapName(cluster string, ordinal int32) string {
	return ServerName(cluster, ordinal) + "-config"
}

// PVCName is the name of a server's data claim: "data-demo-0-0".
func PVCName(cluster string, ordinal int32) string {
	return DataVolumeName + "-" + PodName(cluster, ordinal)
}

// ClientServiceName is the name of the client Service, the cluster's name.
func ClientServiceName(cluster string) string { return cluster }

// HeadlessServiceName is the name of the headless Service: "demo-headless".
func HeadlessServiceName(cluster string) string { return cluster + "-headless" }

// PDBName is the name of the PodDisruptionBudget, the cluster's name.
func PDBName(cluster string) string { return cluster }

// PodHost is a server's stable DNS name through the headless Service:
// "demo-0-0.demo-headless.ns.svc".
func PodHost(cluster, namespace string, ordinal int32) string {
	return PodName(cluster, ordinal) + "." + HeadlessServiceName(cluster) + "." + namespace + ".svc"
}

// RouteURL is the route URL of a server: "nats://demo-0-0.demo-headless.ns.svc:6222".
func RouteURL(cluster, namespace string, ordinal int32) string {
	return fmt.Sprintf("nats://%s:%d", PodHost(cluster, namespace, ordinal), ClusterPort)
}

// ServerOrdinal parses a server name of the cluster back into its ordinal:
// ServerOrdinal("demo", "demo-2") = 2, true; ServerOrdinal("demo", "demo-x")
// = 0, false.
func ServerOrdinal(cluster, server string) (int32, bool) {
	rest, ok := strings.CutPrefix(server, cluster+"-")
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

// ClusterLabels are the labels of every object of the cluster.
func ClusterLabels(cluster string) map[string]string {
	return map[string]string{
		clusterv1beta1.LabelName:      "nats",
		clusterv1beta1.LabelInstance:  cluster,
		clusterv1beta1.LabelManagedBy: clusterv1beta1.ManagedByValue,
		clusterv1beta1.LabelCluster:   cluster,
	}
}

// ServerLabels are the labels of every object of one server: the cluster's
// labels and the server label.
func ServerLabels(cluster string, ordinal int32) map[string]string {
	l := ClusterLabels(cluster)
	l[clusterv1beta1.LabelServer] = ServerName(cluster, ordinal)
	return l
}

// ClusterSelector selects every pod of the cluster (Services, PDB,
// anti-affinity).
func ClusterSelector(cluster string) map[string]string {
	return map[string]string{clusterv1beta1.LabelCluster: cluster}
}

// ServerSelector selects the pod of one server (its StatefulSet's selector,
// which is immutable).
func ServerSelector(cluster string, ordinal int32) map[string]string {
	return map[string]string{
		clusterv1beta1.LabelCluster: cluster,
		clusterv1beta1.LabelServer:  ServerName(cluster, ordinal),
	}
}

// OwnerReference is the controller owner reference to the NatsCluster that
// every rendered object carries.
func OwnerReference(nc *clusterv1beta1.NatsCluster) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{
		APIVersion:         clusterv1beta1.SchemeGroupVersion.String(),
		Kind:               "NatsCluster",
		Name:               nc.Name,
		UID:                nc.UID,
		Controller:         &t,
		BlockOwnerDeletion: &t,
	}
}

func objectMeta(nc *clusterv1beta1.NatsCluster, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       nc.Namespace,
		Labels:          labels,
		OwnerReferences: []metav1.OwnerReference{OwnerReference(nc)},
	}
}
