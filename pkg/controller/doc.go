// Package controller is the NatsCluster controller: shared informers feed a
// named, rate-limited workqueue; each sync gathers what the caches hold,
// renders the desired objects, creates what is missing, and writes status
// only when it changed. It is the only package that writes to Kubernetes.
//
// The structure follows k8s.io/sample-controller, with the Kubernetes
// StatefulSet controller's care: owners resolved by Kind and UID, an object
// the controller does not control is reported (ReconcileFailed), never
// overwritten, and nothing is written when nothing differs.
package controller
