// Package v1beta1 is the v1beta1 version of the cluster.nats-operator.io API:
// the NatsCluster kind, its condition types, reasons and annotation keys.
//
// +k8s:deepcopy-gen=package
// +groupName=cluster.nats-operator.io
// +groupGoName=Cluster
// +kubebuilder:object:generate=false
package v1beta1
