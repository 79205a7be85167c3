// Package testenv runs a local Kubernetes control plane for tests: a real
// etcd and kube-apiserver (and, on request, kube-controller-manager) on free
// loopback ports, with the CRDs of manifests/crds installed and RBAC
// enforced.
//
// The binaries come from hack/testbin.sh, which builds them once into a
// cache outside the repository. Every process runs in its own process group
// with a parent-death signal, so nothing outlives the test binary, even when
// it is killed or interrupted; cleanup stops the kube-controller-manager,
// then the kube-apiserver, then etcd, and kills each whole process group.
//
//	env := testenv.Start(t, testenv.Options{ControllerManager: true})
//	client := kubernetes.NewForConfigOrDie(env.Config)
//
// For a package-wide control plane, use StartMain from TestMain:
//
//	env, stop, err := testenv.StartMain(testenv.Options{})
//	if err != nil { ... }
//	code := m.Run()
//	stop()
//	os.Exit(code)
package testenv
