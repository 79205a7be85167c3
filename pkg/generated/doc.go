// Package generated holds the typed clientset, listers, informers and apply
// configurations of the nats-operator APIs. Everything below it is written by
// hack/update-codegen.sh (k8s.io/code-generator) and never edited by hand;
// hack/verify-codegen.sh fails when it is stale.
package generated
