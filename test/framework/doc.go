// Package framework holds what the end-to-end tests share: applying
// manifests to the local control plane, and running the nats-operator binary
// against it as its ServiceAccount (bound to manifests/rbac, never as an
// administrator), with its health, metrics and log at hand.
package framework
