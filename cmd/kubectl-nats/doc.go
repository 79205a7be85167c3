// Command kubectl-nats is the kubectl plugin of nats-operator; its logic is
// pkg/kubectlnats.
package main
