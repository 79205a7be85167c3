// Command demo is `make demo`: it starts the local control plane (etcd,
// kube-apiserver, kube-controller-manager), a local node that runs pods as
// real nats-server processes, and the controller (as its ServiceAccount, with
// the RBAC of manifests/rbac); applies the example 3-server JetStream
// cluster; waits for it to be Ready and Settled; prints how to watch it and
// how to try a version change; and cleans every process up on Ctrl-C.
package main
