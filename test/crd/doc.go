// Package crd tests the CustomResourceDefinitions of manifests/crds against
// a real kube-apiserver (test/testenv): every manifest of manifests/examples
// is accepted, and bad NatsClusters are refused with an error that names the
// offending field, whether the schema, a CEL rule, a transition rule or
// strict field validation refuses them. plugin_test.go runs the kubectl
// plugin's commands that only read and write the NatsCluster (restart-all,
// force-step, pause, resume, status) against the same API server.
package crd
