// Package e2e holds end-to-end scenarios against the local control plane
// (real etcd, kube-apiserver, kube-controller-manager) with the
// nats-operator binary running as its ServiceAccount.
package e2e
