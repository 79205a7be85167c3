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
//
// # cert-manager
//
// Env.StartCertManager is opt-in: it installs cert-manager's CRDs
// (Certificates, CertificateRequests, Issuers, ClusterIssuers, Orders,
// Challenges) and runs cert-manager's controllers as one more local process,
// stopped before the control plane, its log (cert-manager.log in Dir) kept
// with the others when the test fails:
//
//	env := testenv.Start(t, testenv.Options{})
//	cm, err := env.StartCertManager(ctx, testenv.CertManagerOptions{})
//	// create a CA Secret and an Issuer with spec.ca.secretName in the test's
//	// namespace, then Certificates with issuerRef {kind: Issuer, name: ...};
//	// cert-manager writes tls.crt, tls.key and ca.crt into spec.secretName
//	// and sets the Ready condition (test/certmanager does all of this).
//
// The binary and CRDs come from hack/testbin.sh cert-manager (cert-manager
// v1.21.2 from the Go module proxy; about 8 minutes cold on 2 busy cores,
// 5-20 s with a warm Go build cache, nothing once cached). Upstream's main
// package (cmd/controller) is a module the proxy does not serve, so the
// binary is hack/cert-manager-controller: a small main of ours that starts
// cert-manager's own controllers, unchanged, from the main module. It runs
// the issuers, clusterissuers, certificaterequests-approver,
// certificaterequests-issuer-ca, certificaterequests-issuer-selfsigned and
// certificates-* controllers (CA and SelfSigned issuers only: no ACME,
// Vault, Venafi, ingress or gateway shim, no metrics or healthz server), with
//
//	--kubeconfig=<Env.KubeconfigPath> --leader-elect=false
//	--cluster-resource-namespace=cert-manager (created; ClusterIssuers' Secrets)
//	[--namespace=<CertManagerOptions.Namespace>] [CertManagerOptions.Args...]
//
// It needs neither cert-manager's webhook nor its cainjector: the controller
// never calls them, and the CRDs need no conversion (v1 only). Without the
// webhook, objects are checked only against the CRDs' OpenAPI schemas (an
// invalid Certificate is stored and then reported not Ready, where a real
// install would refuse it), and CertificateRequests carry no
// spec.username/groups (the webhook fills those in; the approver and the CA
// issuer do not use them).
//
// RBAC: the controller uses the administrator's kubeconfig (system:masters),
// not cert-manager's ClusterRoles; a test of the operator's own permissions
// is not affected, as the operator runs as its own ServiceAccount.
//
// Issuance is fast: a Certificate is Ready about 0.2 s after it is created,
// and a renewal (the Issuing condition set as `cmctl renew` does, or a
// changed spec) lands a new certificate and key in the same Secret in under
// 0.5 s. The CRDs are installed when StartCertManager runs, after the
// kube-controller-manager started, so its garbage collector sees cert-manager
// kinds up to 30 s late. NATS_OPERATOR_CERT_MANAGER_DIR names a prebuilt
// directory instead of running the script.
package testenv
