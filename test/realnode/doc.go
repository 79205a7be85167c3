// Package realnode is the end-to-end suite that runs on a real node: the
// kubelet, containerd with runc, the CNI bridge plugin, kube-proxy, CoreDNS
// and kube-router enforcing NetworkPolicies, all started by
// hack/realnode.sh, which runs this suite inside the node's namespaces:
//
//	hack/realnode.sh go test ./test/realnode -v -count=1
//
// (make test runs it so.) Outside that script the suite fails at once,
// saying how to run it: it needs KUBECONFIG and REALNODE_DIR from the
// script, and the images the script imports into containerd.
//
// What it proves that test/localnode cannot: the controller installed as
// its Deployment from its image (two replicas, leader election) and the
// example cluster run by containerd from images, with real probes and a
// real restricted securityContext (checked on the server's process: uid,
// read-only root, no capabilities); a rolling upgrade under a publisher;
// a scale 3 -> 5 -> 3; a config change applied by reload with the
// kubelet's real ConfigMap refresh; backup and restore Jobs; and the
// cluster's NetworkPolicy enforced (connections from client pods in other
// namespaces, the monitoring and metrics ports, the controller's own
// $SYS connections). Each scenario logs what it measured.
//
// The client pods run cmd/natsprobe, which dials from the pod's own
// network namespace and reports what happened, so a refused connection is
// quoted with its error.
package realnode
