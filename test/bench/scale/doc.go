// Command scale is the scale benchmark of issue 21, run by hand with
// hack/bench-scale.sh, not in CI. On the local stack (test/testenv's etcd,
// kube-apiserver and kube-controller-manager; one test/localnode node that
// runs pods as nats-server processes) it starts ONE controller, the
// cmd/nats-operator binary, as framework.StartController does (the
// nats-system/nats-operator ServiceAccount with the RBAC of manifests/rbac,
// leader election on, -v=6 so that every API request it makes is logged),
// then:
//
//  1. creates --objects unrelated objects in namespaces of their own
//     (bench-other-<i>): 40% ConfigMaps, 20% Secrets of 50 kB, 40% Pods.
//     The Pods carry a nodeSelector no node matches
//     (bench.nats-operator.io/never-scheduled=true), so they stay Pending
//     (PodScheduled False Unschedulable) and the local node runs nothing
//     for them. A nodeName of a Node that does not exist was not chosen:
//     kube-controller-manager's pod garbage collector deletes such pods.
//  2. measures the controller at rest with 0 NatsClusters over --window:
//     RSS (VmRSS, /proc/<pid>/status), CPU seconds (utime+stime,
//     /proc/<pid>/stat), the Go heap (go_memstats_* from its /metrics), and
//     its API requests counted from the request lines of its -v=6 log
//     (client-go's round_trippers "Response" lines), split by verb; a GET of
//     a collection is a LIST, a GET with watch=true a WATCH. Lease requests
//     (leader election) are counted apart.
//  3. creates --clusters NatsClusters of 1 server each (the example
//     JetStream cluster of manifests/examples with replicas 1, on
//     --from-version), spread over --namespaces namespaces (bench-nats-<i>),
//     and times until every one is Ready (AllServersReady), Settled
//     (AllGroupsCurrent) and Progressing=False UpToDate. Without
//     --jetstream, spec.jetstream is removed: a 1-server JetStream cluster
//     never becomes Ready, since every rendered config has a cluster block
//     (its routes name the server itself) and nats-server 2.15 then waits
//     for peers forever ("JetStream is still recovering meta layer", the
//     meta group never elects a leader; measured with the rendered
//     config by hand).
//  4. measures the controller at rest with them, as in 2, plus the
//     monitoring cost: each server's /varz http_req_stats before and after
//     --monitor-window (120 s, from the start of --window), per path. /varz, /jsz, /routez and /gatewayz are asked by
//     the controller only (the benchmark's own /varz read after the window
//     is subtracted); /healthz is also the kubelet's probe path, so the
//     probes the pod spec runs in the window (readiness every 5 s,
//     liveness every 30 s) are subtracted: an estimate per server, exact
//     on average.
//  5. for each of --workers (default 1,4,16): restarts the controller with
//     that many workers, changes spec.version of every cluster (back and
//     forth between --from-version and --to-version), and times until every
//     cluster is up to date on it; prints the slowest single cluster's
//     own rollout beside the whole, and their ratio. A cluster's own
//     rollout runs from its first step (a watch of the StatefulSets
//     showing one of its servers' templates on the new version: the first
//     write of the controller's restart step) or its Progressing=True,
//     whichever the watches showed first, to its UpToDate. The controller
//     writes Progressing once the step's writes are done (the template,
//     the ConfigMap, the pod's deletion), so timed from Progressing alone,
//     as before run 11e of hack/bench-scale.fleet.txt, a cluster's rollout
//     leaves out its first step's own writes, which the whole counts: 1.8-2
//     s on average in a 100-cluster change on 2 cores, by the controller's
//     nats_operator_step_duration_seconds, also printed. That figure and
//     ratio are printed too (_from_progressing). Every time is taken by a
//     watch as its event arrives, not by a List (listing 100 NatsClusters
//     twice a second was load on the API server the controller shares);
//     before run 11c the watch's cache was read every 500 ms, and a time was
//     up to one such period late. Also the workqueue's max
//     depth (sampled every 500 ms) and queue
//     and work latency over the run (mean, and p50/p99 as histogram bucket
//     upper bounds) from the controller's /metrics for name="natscluster".
//     Also: how late the API server's watch events reach a client (from
//     each cluster's patch response to the bench's own watch showing the
//     new spec, p50 and max); the cluster that waited longest from its
//     patch to Progressing, and the one up to date last and the one with
//     the slowest rollout, each phase by phase (patched, Progressing, its
//     pod deleting, gone, created, Ready, up to date); and the requests
//     that queued in the API server's API Priority and Fairness, with how
//     long in all.
//
// Every figure is printed as a number on a line of its own, "name: value
// unit", with the machine's cores (nproc). --clusters 10 --objects 1000 is a
// quick run; the default is the full run, 100 and 10,000.
package main
