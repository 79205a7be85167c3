// Command nats-operator runs the NatsCluster controller: flags, kubeconfig or
// in-cluster config, leader election on a Lease, /healthz /readyz and
// /metrics, and a graceful shutdown on SIGTERM that drains in-flight syncs
// before the lease is released.
package main
