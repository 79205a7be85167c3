// Command demo is `make demo`: it starts the local control plane (etcd,
// kube-apiserver, kube-controller-manager), a local node that runs pods as
// real nats-server processes, and the controller (as its ServiceAccount, with
// the RBAC of manifests/rbac); applies the example 3-server JetStream
// cluster; waits for it to be Ready and Settled; prints how to watch it and
// how to try a version change, with kubectl and the plugin (both built into
// a directory to put on PATH); prints `kubectl nats status` again each time
// the cluster changes; and on Ctrl-C stops every process it started, says
// so and exits 0 (hack/demo.sh runs it as a job of its own on a terminal, so
// that make does not get the Ctrl-C and exits 0 too).
package main
