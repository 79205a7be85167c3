// Package localnode plays the kubelet for nats-server pods on one machine,
// so the controller can be tested end to end against a real kube-apiserver
// and kube-controller-manager (see test/testenv) with no container runtime.
//
//	node, err := localnode.New(env.Config, localnode.Options{Root: t.TempDir()})
//	if err := node.Start(ctx); err != nil { ... }
//	defer node.Stop()
//
// What it does, like a kubelet where the controller can tell the difference:
//
//   - Registers a Ready Node (default "localnode"), renews its Lease in
//     kube-node-lease and its Ready condition every 10 s, and binds every pod
//     without a nodeName to it through the Binding subresource (no
//     scheduling: node selectors, affinity and taints are ignored).
//
//   - Gives each pod a loopback address 127.<b>.x.y, starting at 127.0.0.2.
//     The address is allocated by namespace/name on first reference (a pod
//     or PodAddress) and kept for the node's life, so a recreated
//     StatefulSet pod comes back on the same address and no two names share
//     one; a new pod of a name starts only after the previous pod of that
//     name is gone. Each Node takes a free block b under a lock file in
//     $TMPDIR/nats-operator-localnode, so nodes in parallel test binaries
//     never collide (the first gets 127.0.0.x). Every pod has its own
//     address, so every server listens on its usual ports.
//
//   - Resolves the cluster's DNS names for real, in each pod's own
//     /etc/hosts (dns.go). Every process the node starts for a pod
//     (containers, exec hooks and probes) runs in a mount namespace of its
//     own, where the pod's hosts file is bind-mounted over /etc/hosts and a
//     resolv.conf naming a nameserver where nothing listens over
//     /etc/resolv.conf; the machine's files and mounts never change
//     (internal/podns: the process starts as this program re-executed
//     with CLONE_NEWNS, which makes every mount private, bind-mounts the
//     files and execs the real command, keeping its pid, process group and
//     parent-death signal). The hosts file has the kubelet's lines
//     (localhost; the pod's own address, hostname and, with
//     spec.subdomain, <hostname>.<subdomain>.<ns>.svc.cluster.local), but
//     localhost is the pod's own address, not 127.0.0.1 (and ::1 is not
//     localhost; spec.hostAliases follow, 127.0.0.1 as the pod's own
//     address too, and a name an alias gives has no cluster DNS line, as
//     the resolver reads the file first): pods share the machine's loopback, and a pod's own
//     address is where only its containers listen, as on a real pod's
//     loopback, so a sidecar reaches its nats-server at
//     http://localhost:8222 (literal 127.0.0.1 and ::1 are the machine's;
//     curl resolves localhost by itself). Then
//     what CoreDNS answers from the Services with a selector, whichever
//     node runs their pods: a headless Service <svc> gives
//     <svc>.<ns>.svc.cluster.local the address of every endpoint and, for a
//     pod with spec.hostname <h> and spec.subdomain <svc> (a StatefulSet
//     pod of serviceName <svc>), <h>.<svc>.<ns>.svc.cluster.local its
//     address; any other Service gives <svc>.<ns>.svc.cluster.local the
//     address of one endpoint (the first by pod name), standing for its
//     virtual IP. An endpoint is a pod of the selector with an address,
//     Ready and not terminating, or any pod not finished if the Service has
//     publishNotReadyAddresses. Each name is also listed in the short
//     forms the pod's search path (<ns>.svc.cluster.local,
//     svc.cluster.local, cluster.local) would find: <h>.<svc>.<ns>.svc,
//     <h>.<svc>.<ns>, and <h>.<svc> in the same namespace. The file follows
//     pods and Services as they come and go: it is rewritten in place (a
//     bind mount follows the inode, not the name) with a strictly later
//     modification time, every pod's from one view, whose lines are
//     resolved once per namespace; after a rewrite the loop rests four
//     times as long as it took (bursts of changes, as when 100 pods
//     restart at once, then wait together). Go programs, nats-server included, read
//     /etc/hosts with "hosts: files dns" in nsswitch.conf (the Go resolver
//     and glibc alike, whichever the binary uses) and re-read it when its
//     size or time changed, at most every 5 s, so a running server sees a
//     new pod's name within about 5 s. A name not in the file fails at once
//     without a query leaving the machine. So configs run as rendered:
//     a route nats://demo-1-0.demo-headless.nats.svc:6222 dials demo-1-0's
//     address, and a certificate is checked for the name. Processes that
//     are not pods (the controller under test, test clients) keep the
//     machine's resolver: Resolve, DialContext and Dial give them the
//     same answers. This needs CAP_SYS_ADMIN (root), else unprivileged
//     user namespaces (then each pod's processes run as uid 0 of a user
//     namespace mapped to the caller); New fails, saying so, with neither.
//
//   - Reports status like the kubelet: podIP/podIPs, hostIP 127.0.0.1, phase,
//     conditions (PodReadyToStartContainers, Initialized, ContainersReady,
//     Ready honouring readiness gates, PodScheduled), container statuses
//     (state, lastState, ready, started, restartCount, image, imageID,
//     containerID). Status is written with a strategic merge patch on the
//     status subresource, so conditions of others (DisruptionTarget) stay.
//
//   - Runs containers whose image is nats or nats-server as the nats-server
//     binary of the image tag's version (nats:2.15.1, nats:2.15.1-alpine and
//     nats:2.15.1@sha256:... all give 2.15.1; no tag or latest gives
//     DefaultVersion) from Options.BinaryForVersion, by default
//     hack/testbin.sh nats <version>. Containers whose image's repository
//     ends in prometheus-nats-exporter (natsio/prometheus-nats-exporter:0.20.1)
//     run the exporter binary of Options.ExporterBinary, by default
//     hack/testbin.sh exporter (built from the source vendored in
//     third_party/prometheus-nats-exporter, v0.20.1, whatever the tag):
//     without a command, the image's entrypoint with the container's args
//     (or the image's CMD, --help, without args either). A nats or exporter
//     image whose binary cannot be had waits with ErrImagePull; its imageID
//     is <repository>@sha256:<digest of the binary>. Other images run their
//     command if it is found on the host (sh, sleep), else they wait with
//     RunContainerError. Options.Images maps other image repositories to
//     local binaries (the shared e2e stack maps
//     ghcr.io/nats-operator/nats-operator, the controller's image, to the
//     binary built from the checkout): the binary is the image's
//     entrypoint, and a command word naming its base name becomes it.
//     Options.ImageArchives maps repositories to OCI image archives
//     (internal/image; the Deployment e2e tests run the controller's image
//     so): the node unpacks an image's layers once, into
//     Root/images/<digest>/rootfs, and runs the program of its entrypoint
//     (or the container's command, a path or a name in the image's PATH)
//     from there as a local process, with the container's args (else the
//     image's cmd); its imageID is <repository>@<the image's digest>, and a
//     reference pinned to another digest waits with ErrImagePull. The
//     image's env and working directory are not applied (the controller's
//     image has neither). The environment is PATH, HOSTNAME, HOME,
//     KUBERNETES_SERVICE_HOST, _PORT and _PORT_HTTPS (the API server's own
//     address: there is no kube-proxy for the kubernetes Service), envFrom
//     and env (value, fieldRef, resourceFieldRef, configMapKeyRef,
//     secretKeyRef) with $(VAR) expansion; container mount paths in env
//     values become the local directories, as in args (SSL_CERT_FILE).
//
//   - Gives pods API access as a kubelet does (apiaccess.go): a
//     serviceAccountToken projection (the kube-api-access-* volume the
//     ServiceAccount admission plugin adds) holds a real token of the pod's
//     service account, bound to the pod, from the TokenRequest API, renewed
//     after 80% of its lifetime; with the kube-root-ca.crt ConfigMap and the
//     namespace beside it. Mounts under /var/run/secrets and /run/secrets,
//     which programs read by convention rather than by an argument, are
//     bind-mounted at their path in the container's mount namespace (their
//     mount points are created on the machine as empty directories), so
//     client-go's rest.InClusterConfig works unchanged. A command-line flag
//     that listens on a port of every interface (--health-addr=:8081)
//     listens on the pod's address instead.
//
//   - Volumes live under Root/pods/<ns>_<pod>_<uid>/volumes/<name>, removed
//     with the pod. ConfigMap, Secret, downwardAPI and projected volumes are
//     written the kubelet's way (files are symlinks through ..data, swapped
//     atomically) and compared with their sources every SyncPeriod (1 s).
//     emptyDir is fresh per pod. A missing source of a projected volume holds the pod too, unless optional, as in the kubelet. A persistentVolumeClaim is the directory
//     Root/pvc/<ns>/<claim> (ClaimPath), which outlives pods and nodes; a new
//     claim of the same name (new UID) starts empty. The node creates a
//     hostPath PersistentVolume "localnode-<claim uid>" pre-bound to the
//     claim, sets the claim's volumeName and marks both Bound. A pod waits
//     (ContainerCreating) until its claims, ConfigMaps and Secrets exist.
//
//   - Grows claims in place, as a CSI external-resizer and the kubelet do
//     (resize.go). The API server lets a Bound claim's storage request grow
//     only if its StorageClass has allowVolumeExpansion: true (the default
//     PersistentVolumeClaimResize admission plugin). When a claim bound to
//     one of this node's volumes requests more than status.capacity, the
//     node writes, one step at a time: condition Resizing with
//     allocatedResources and allocatedResourceStatuses
//     ControllerResizeInProgress; the volume's spec.capacity;
//     FileSystemResizePending with NodeResizePending; then, once a pod of
//     this node uses the claim (at once if one runs, else when the next one
//     mounts it, before its containers start), NodeResizeInProgress and
//     finally status.capacity with the resize conditions and statuses
//     cleared. Running containers are not restarted. kube-controller-manager's
//     expand controller only records "waiting for an external controller to
//     expand this PVC" for these hostPath volumes.
//
//   - Maps what only makes sense inside a pod's own network and
//     filesystem (the node gives pods neither) to its local equivalent. In
//     every .conf or .json file of a ConfigMap or Secret volume that parses
//     as JSON, and in container commands, args, working dirs, exec hooks and
//     exec probes: 0.0.0.0 and [::] hosts (also "listen": ":4222") become the
//     pod address; container mount paths become the local directories; a
//     command word nats-server (or /path/nats-server), or
//     prometheus-nats-exporter in an exporter container, becomes the local
//     binary. An exporter command line without -addr (whose default is
//     0.0.0.0) gets -addr=<pod address>, so each pod's exporter listens on
//     7777 of its own address. A JSON server config (with keys such as port, listen, cluster,
//     jetstream) without a host in the top level or in cluster, gateway,
//     leafnodes, websocket or mqtt gets "host": <pod address>. DNS names are
//     left as they are (the pod's /etc/hosts resolves them). The mounted
//     file is the rewritten copy; the server reads it, and a ConfigMap edit
//     rewrites it again.
//
//   - Probes (startup, readiness, liveness; httpGet on the pod address,
//     tcpSocket, exec) with their delays, periods, timeouts and thresholds.
//     A container that exits or fails its liveness or startup probe is
//     restarted: the first restart at once, then Options.BackoffBase (1 s)
//     doubling to BackoffMax (30 s), reset after BackoffReset (10 m) of
//     running; the kubelet uses 10 s to 5 m. restartCount and
//     lastState.terminated follow. A liveness kill runs the preStop hook as
//     the kubelet does.
//
//   - On deletion (deletionTimestamp): the preStop hook (exec, httpGet or
//     sleep), then, after Options.StopSignalDelay (250ms, standing for the
//     container runtime's latency), SIGTERM to the process group, then
//     SIGKILL when the
//     deletion grace period is over (at least 2 s after the hook), then the
//     final status and a delete with grace period 0 and a UID precondition,
//     so the StatefulSet controller recreates the pod. A pod deleted from
//     the API by force is stopped the same way.
//
//   - A container's termination message is the file at its
//     terminationMessagePath when that lies under one of its volume mounts
//     (read from the mount's local directory, at most 4096 bytes, as a
//     kubelet keeps); else, under FallbackToLogsOnError, the tail of its
//     log when it failed. (The node gives a container no file of its own
//     at the default /dev/termination-log.)
//
//   - Container output goes to Root/logs/<ns>_<pod>_<container>.log
//     (LogPath, ContainerLogPath), appended across restarts, with
//     "localnode: ..." lines at each start, hook and exit.
//
//   - Every process runs in its own process group with a parent-death
//     SIGKILL, started from one OS thread that lives as long as the node's
//     process, so nothing outlives the test binary even when it is killed.
//     Stop sends SIGKILL to every process group and leaves API objects as
//     they are (as a dead kubelet would). PIDs lists every process ever
//     started, for tests checking that none outlives them (ProcessAlive).
//     The parent-death signal reaches direct children only: a grandchild of
//     an exec hook or probe (sh -c "sleep 1") is orphaned, not killed, if the
//     test binary dies by SIGKILL (Stop kills whole process groups).
//     nats-server does not fork.
//
//   - A node started again on the same Root and NodeName (after Stop or a
//     crash) runs the pods bound to it again, counting a restart of each
//     container that had run (restartCount+1, lastState terminated). Claim
//     directories and emptyDirs (keyed by pod UID) survive; the pod address
//     may change, as after a reboot.
//
// Not done: container image changes in place (pods are replaced by
// StatefulSets anyway), sidecar init containers, gRPC probes, service
// environment variables (but the kubernetes Service's), resource limits,
// readOnlyRootFilesystem and runAsUser (processes run as the caller),
// Service virtual IPs and ports
// (a Service name is one endpoint's address, and its port must be the
// container's), ExternalName Services, a cluster DNS server (a pod's names
// are in its /etc/hosts; dnsPolicy and dnsConfig are ignored), pod
// hostnames (a UTS namespace; HOSTNAME is set), outgoing connections come
// from 127.0.0.1 rather than the pod address.
//
// The command test/localnode/cmd/localnode runs a node alone against a
// kubeconfig.
package localnode
