// Command nats-operator runs the NatsCluster controller: flags, kubeconfig or
// in-cluster config, leader election on a Lease, /healthz /readyz and
// /metrics, and a graceful shutdown on SIGTERM that drains in-flight syncs
// before the lease is released.
//
// /metrics (metrics.go) is HTTPS by default, and the API server decides
// who reads it, as it does for Kubernetes' own components
// (k8s.io/apiserver's delegating authenticator and authorizer): a request's
// bearer token is checked by a TokenReview, then `get` on the non-resource
// URL /metrics by a SubjectAccessReview (ClusterRole
// nats-operator-metrics-reader); 401 and 403 otherwise, answers cached for a
// minute. The reviews have a client of their own (20 requests a second,
// burst 40), so requests with made-up tokens never wait on, nor make wait,
// the rate limiter that leader election and every step share; at most 8
// are in flight, and a request needing one more is answered 429 at once.
// The certificate is --metrics-cert-dir's tls.crt and tls.key, else
// self-signed at start; --metrics-secure=false serves plain HTTP to anyone.
//
// /healthz fails when the Lease stopped being renewed (client-go's
// HealthzAdaptor) or, while this replica leads, when the workers are
// wedged: a sync running longer than --worker-stall-timeout, or
// NatsClusters queued and no worker taking one for that long
// (controller.WorkerHealth). /readyz waits for the informer caches.
package main
