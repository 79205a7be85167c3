// Package v1beta1 is the v1beta1 version of the nats-operator.io API: the
// trust roots a NatsCluster boots from in operator mode (NatsOperatorTrust)
// and the accounts its servers preload (NatsAccountTrust).
//
// +k8s:deepcopy-gen=package
// +groupName=nats-operator.io
// +groupGoName=Trust
// +kubebuilder:object:generate=false
package v1beta1
