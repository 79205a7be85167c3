// Package framework holds what the end-to-end tests share: the package
// stack (one control plane, one local node and one controller per test
// package, shared.go), applying manifests to it, and running the
// nats-operator binary against it as its ServiceAccount (bound to
// manifests/rbac, never as an administrator), with its health, metrics and
// log at hand.
//
// A test picks one of three stacks:
//   - Shared(ctx, t, ns): the package stack in a namespace of its own,
//     registered with SharedNamespace from a package-level var; the shared
//     controller acts on it. Most tests: they only apply, wait and check.
//   - OwnController(ctx, t, ns, args...): the package's control plane and
//     node with a controller of the test's own, watching ns alone, for a
//     test that kills, upgrades or re-flags the controller, or counts its
//     writes.
//   - StartStack, StartStackWithNode, StartStackWithoutController: a whole
//     stack of its own, for what cannot be shared: the node's options
//     (taints, a crashing binary, a slow volume sync), the controller
//     installed as its Deployment (which watches every namespace), a
//     controller that logs every request.
//
// Every test calls t.Parallel(); go test's -parallel bounds how many run
// at once (hack/test.sh sets it for test/e2e).
package framework
