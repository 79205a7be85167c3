// Package apis holds the API types of nats-operator: NatsCluster in
// cluster.nats-operator.io/v1beta1, and NatsOperatorTrust and NatsAccountTrust
// in nats-operator.io/v1beta1. The types are the source of the generated
// clientset, listers, informers and CRD manifests (hack/update-codegen.sh).
package apis
