// Command kubectl-nats is the kubectl plugin of nats-operator; its logic is
// internal/kubectlnats.
package main
