// Package kubeutil holds small facts about Kubernetes objects that the
// controller and the tests both need and must agree on, such as when a pod
// counts as Ready.
package kubeutil
