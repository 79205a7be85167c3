#!/usr/bin/env bash
# realnode.sh starts a real Kubernetes node and its control plane, runs a
# command against it, and tears everything down, even when the command or
# the start failed:
#
#   hack/realnode.sh [COMMAND [ARGS...]]   (as root; default: a shell)
#
# The stack: etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler; containerd (Debian's runc, the CNI bridge, host-local,
# portmap and loopback plugins); the kubelet; kube-proxy (iptables mode);
# CoreDNS (the kubernetes plugin) as the cluster DNS; kube-router's
# NetworkPolicy controller (iptables + ipset), which enforces policies.
# Every binary is built from the Go module proxy by hack/testbin.sh (or is
# a Debian package, hack/node-packages.sh); every image the pods run is
# built here and imported into containerd (no registry): the controller's
# (make image), nats-server's, the exporter's and the pause image, each
# under the name the manifests use.
#
# Everything runs in new PID, network, mount and UTS namespaces: traffic
# stays inside (loopback and the pods' bridge, no default route out), the
# machine's mounts, sysctls and firewall are untouched, and when COMMAND
# ends the PID namespace ends with it, which kills every process of the
# stack, containers included. The cgroups the kubelet made are then
# removed, and the script checks that no process, mount or cgroup of the
# stack is left.
#
# COMMAND runs inside, with KUBECONFIG (an administrator), REALNODE_DIR
# (the stack's directory: logs/, kubeconfigs, the images) and
# REALNODE_NODE (the node's name) set; the stack's binaries are on PATH.
# It may also read the node's addresses: REALNODE_IP (the node, the pods'
# gateway), REALNODE_POD_CIDR, REALNODE_SERVICE_CIDR.
#
# Environment: REALNODE_KEEP=1 keeps the stack's directory (logs) after a
# passing run (a failing one always keeps it).
#
# The machine's known limits and their work-arounds (docs/realnode.md):
# cgroup v1 only (failCgroupV1: false), no CAP_SYS_RESOURCE (containerd's
# restrict_oom_score_adj, kube-proxy --oom-score-adj=0), the kubelet's
# writes of VM-wide sysctls (files holding the values it wants are
# bind-mounted over them in the node's mount namespace), no registry
# (images imported).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE_NAME=realnode
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SVC_IP=10.96.0.1
KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
PAUSE_IMAGE=registry.k8s.io/pause:3.10.2
NATS_VERSIONS=(2.15.2 2.15.1)
EXPORTER_IMAGE=docker.io/natsio/prometheus-nats-exporter:0.20.1
CONTROLLER_IMAGE=ghcr.io/nats-operator/nats-operator:v0.1.0
PROBE_IMAGE=nats-operator.test/natsprobe:dev

log() { echo "realnode: $*" >&2; }

# --- inside the namespaces -------------------------------------------------

inner() {
  local dir="$1"; shift
  export REALNODE_DIR="$dir"
  local logs="$dir/logs" bin="$dir/bin"
  export PATH="$bin:$PATH"
  hostname "$NODE_NAME"
  # Mounts made from here (the kubelet's volumes, containerd's rootfs)
  # propagate where the kubelet expects them to, and never leave this
  # mount namespace.
  mount --make-rshared /
  # /run of this namespace's own: containerd's shims and runc keep state
  # under /run/containerd whatever its configured state directory.
  mount -t tmpfs -o mode=755 tmpfs /run

  # The network: loopback and cni0, the bridge the CNI plugin attaches the
  # pods to, holding the node's address (the pods' gateway). The service
  # range routes over it, so this namespace's own clients (COMMAND) reach
  # Service IPs through kube-proxy's rules; nothing routes anywhere else.
  ip link set lo up
  ip link add cni0 type bridge
  ip addr add "$NODE_IP/24" dev cni0
  ip link set cni0 up
  ip route add "$SERVICE_CIDR" dev cni0 src "$NODE_IP"
  echo 1 > /proc/sys/net/ipv4/ip_forward
  # Pod-to-pod traffic on the bridge goes through iptables, where
  # kube-router's policy chains are (the kubelet and kube-proxy need it too).
  echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables

  # The kubelet sets these VM-wide sysctls (setupKernelTunables) when they
  # differ from what it wants; this machine's values are kept by showing
  # it, in this mount namespace only, files that hold its values.
  local want
  for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
    kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
    want="${kv#*=}"
    if [[ "$(cat "/proc/sys/${kv%%=*}")" != "$want" ]]; then
      echo "$want" > "$dir/sysctl.$(echo "${kv%%=*}" | tr / .)"
      mount --bind "$dir/sysctl.$(echo "${kv%%=*}" | tr / .)" "/proc/sys/${kv%%=*}"
    fi
  done

  # Names: this namespace resolves through the cluster DNS (CoreDNS on the
  # node's address), the node's own name through /etc/hosts.
  printf 'nameserver %s\nsearch svc.cluster.local cluster.local\noptions ndots:5 timeout:1 attempts:2\n' "$NODE_IP" > "$dir/resolv.conf"
  printf '127.0.0.1 localhost\n%s %s\n' "$NODE_IP" "$NODE_NAME" > "$dir/hosts"
  mount --bind "$dir/resolv.conf" /etc/resolv.conf
  mount --bind "$dir/hosts" /etc/hosts
  # The pods' resolv.conf: the kubelet adds the cluster DNS and search
  # path to this file's (none: nothing outside to resolve).
  : > "$dir/pod-resolv.conf"

  start etcd "$logs/etcd.log" etcd --name=default --data-dir="$dir/etcd" \
    --listen-client-urls=http://127.0.0.1:2379 --advertise-client-urls=http://127.0.0.1:2379 \
    --listen-peer-urls=http://127.0.0.1:2380 --initial-advertise-peer-urls=http://127.0.0.1:2380 \
    --initial-cluster=default=http://127.0.0.1:2380 --unsafe-no-fsync --log-level=warn
  wait_for "etcd" curl -sf http://127.0.0.1:2379/health

  local pki="$dir/pki"
  start kube-apiserver "$logs/kube-apiserver.log" kube-apiserver \
    --etcd-servers=http://127.0.0.1:2379 \
    --bind-address=0.0.0.0 --secure-port=6443 --advertise-address="$NODE_IP" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --token-auth-file="$pki/tokens.csv" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.key" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --allow-privileged=true --profiling=false
  wait_for "kube-apiserver" kubectl --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz

  start kube-controller-manager "$logs/kube-controller-manager.log" kube-controller-manager \
    --kubeconfig="$dir/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$dir/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$dir/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
    --allocate-node-cidrs=true --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24 \
    --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false
  start kube-scheduler "$logs/kube-scheduler.log" kube-scheduler \
    --kubeconfig="$dir/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$dir/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$dir/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --profiling=false

  # The kubelet's client (the API server's system:kubelet-api-admin).
  kubectl --kubeconfig "$dir/admin.kubeconfig" create clusterrolebinding kube-apiserver-kubelet-admin \
    --clusterrole=system:kubelet-api-admin --user=kube-apiserver >/dev/null

  start containerd "$logs/containerd.log" containerd --config "$dir/containerd.toml"
  wait_for "containerd" ctr --address "$dir/containerd/containerd.sock" version
  local img
  for img in "$dir"/images/*.tar; do
    ctr --address "$dir/containerd/containerd.sock" -n k8s.io images import --local "$img" >/dev/null 2>&1 ||
      ctr --address "$dir/containerd/containerd.sock" -n k8s.io images import "$img" >/dev/null
  done
  # manifests/ name the controller's image (and the Jobs') by its release
  # tag; make image tags the build of a checkout dev.
  ctr --address "$dir/containerd/containerd.sock" -n k8s.io images tag --force \
    "${CONTROLLER_IMAGE%:*}:dev" "$CONTROLLER_IMAGE" >/dev/null
  ctr --address "$dir/containerd/containerd.sock" -n k8s.io images ls -q | grep -v '^sha256:' | sed 's/^/realnode: image /' >&2

  start kubelet "$logs/kubelet.log" kubelet --config="$dir/kubelet.yaml" \
    --kubeconfig="$dir/kubelet.kubeconfig" --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" \
    --v=1
  wait_for "the node to register" kubectl --kubeconfig "$dir/admin.kubeconfig" get node "$NODE_NAME"
  # The CNI configuration follows the node's pod range (the first /24 of
  # the cluster range, as kube-controller-manager allocates it).
  local cidr=""
  for _ in $(seq 60); do
    cidr="$(kubectl --kubeconfig "$dir/admin.kubeconfig" get node "$NODE_NAME" -o jsonpath='{.spec.podCIDR}')"
    [[ -n "$cidr" ]] && break
    sleep 1
  done
  [[ "$cidr" == "$POD_CIDR" ]] || { log "node $NODE_NAME has pod range '$cidr', want $POD_CIDR"; return 1; }

  start kube-proxy "$logs/kube-proxy.log" kube-proxy --config="$dir/kube-proxy.yaml" \
    --hostname-override="$NODE_NAME" --oom-score-adj=0 --v=1
  start coredns "$logs/coredns.log" coredns -conf "$dir/Corefile"
  start kube-router "$logs/kube-router.log" kube-router --kubeconfig="$dir/admin.kubeconfig" \
    --hostname-override="$NODE_NAME" --run-firewall=true --run-router=false --run-service-proxy=false \
    --run-loadbalancer=false --enable-cni=false --metrics-port=0 --health-port=20244 -v=1
  wait_for "the node to be Ready" kubectl --kubeconfig "$dir/admin.kubeconfig" wait --for=condition=Ready \
    "node/$NODE_NAME" --timeout=5s
  wait_for "the cluster DNS" sh -c "getent hosts kubernetes.default.svc.cluster.local >/dev/null"
  wait_for "kube-proxy's rules for kubernetes.default" curl -sk --max-time 2 -o /dev/null "https://$KUBERNETES_SVC_IP/readyz"
  wait_for "kube-router" curl -sf --max-time 2 http://127.0.0.1:20244/healthz

  kubectl --kubeconfig "$dir/admin.kubeconfig" apply -f "$dir/storage.yaml" >/dev/null
  log "node $NODE_NAME Ready at $((SECONDS - ${REALNODE_BEGIN:-0})) s (${REALNODE_DIR})"

  export KUBECONFIG="$dir/admin.kubeconfig" REALNODE_NODE="$NODE_NAME" REALNODE_IP="$NODE_IP" \
    REALNODE_POD_CIDR="$POD_CIDR" REALNODE_SERVICE_CIDR="$SERVICE_CIDR"
  set +e
  "$@"
  local rc=$?
  set -e
  log "command exited $rc; stopping the node"
  # The kubelet first, so it does not restart what is stopped; then the
  # pods' containers with containerd (the PID namespace's end kills what
  # is left).
  stop_all
  return $rc
}

pids=()
start() {
  local name="$1" out="$2"; shift 2
  "$@" > "$out" 2>&1 &
  pids+=("$!")
  echo "$!" > "$REALNODE_DIR/$name.pid"
}

stop_all() {
  local p
  for p in kubelet kube-proxy kube-router coredns kube-scheduler kube-controller-manager; do
    [[ -f "$REALNODE_DIR/$p.pid" ]] && kill "$(cat "$REALNODE_DIR/$p.pid")" 2>/dev/null || true
  done
  if [[ -S "$REALNODE_DIR/containerd/containerd.sock" ]]; then
    local c
    for c in $(ctr --address "$REALNODE_DIR/containerd/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$REALNODE_DIR/containerd/containerd.sock" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
    done
  fi
  for p in containerd kube-apiserver etcd; do
    [[ -f "$REALNODE_DIR/$p.pid" ]] && kill "$(cat "$REALNODE_DIR/$p.pid")" 2>/dev/null || true
    sleep 0.5
  done
  wait 2>/dev/null || true
}

# wait_for WHAT CMD... retries CMD for up to two minutes.
wait_for() {
  local what="$1"; shift
  local i
  for i in $(seq 240); do
    if "$@" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.5
  done
  log "timed out waiting for $what; the last logs:"
  tail -n 30 "$REALNODE_DIR"/logs/*.log >&2 || true
  return 1
}

if [[ "${1:-}" == --inner ]]; then
  shift
  d="$1"; shift
  inner "$d" "$@"
  exit $?
fi

# --- outside: build, configure, run, clean up ------------------------------

if [[ $(id -u) != 0 ]]; then
  log "must run as root (namespaces, mounts, cgroups, iptables)"
  exit 1
fi
(( $# > 0 )) || set -- bash
REALNODE_BEGIN=$SECONDS
export REALNODE_BEGIN

bash "$REPO_ROOT/hack/node-packages.sh"
cp_dir="$(bash "$REPO_ROOT/hack/testbin.sh" control-plane)"
node_dir="$(bash "$REPO_ROOT/hack/testbin.sh" node)"
exporter_dir="$(bash "$REPO_ROOT/hack/testbin.sh" exporter)"

dir="$(mktemp -d "${TMPDIR:-/tmp}/nats-operator-realnode.XXXXXX")"
chmod 755 "$dir"
mkdir -p "$dir/logs" "$dir/bin" "$dir/images" "$dir/pki" "$dir/pv" "$dir/cni/net.d" "$dir/kubelet"
log "stack directory $dir"

for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; do
  ln -s "$cp_dir/$b" "$dir/bin/$b"
done
for b in containerd containerd-shim-runc-v2 ctr coredns kube-router; do
  ln -s "$node_dir/$b" "$dir/bin/$b"
done

# Images, each under the name the manifests and the renderer use.
(
  cd "$REPO_ROOT"
  go build -o "$dir/nodeimage" ./hack/nodeimage
  "$dir/nodeimage" -binary "$node_dir/pause" -path /pause -tag "$PAUSE_IMAGE" -user 65535:65535 -out "$dir/images/pause.tar"
  for v in "${NATS_VERSIONS[@]}"; do
    s="$(bash hack/testbin.sh nats-static "$v")"
    "$dir/nodeimage" -binary "$s/nats-server" -path /nats-server -tag "docker.io/library/nats:$v" -out "$dir/images/nats-$v.tar"
  done
  "$dir/nodeimage" -binary "$exporter_dir/prometheus-nats-exporter" -path /prometheus-nats-exporter \
    -tag "$EXPORTER_IMAGE" -out "$dir/images/exporter.tar"
  # The controller's image as make image builds it (tag dev), named in
  # containerd as manifests/ name it (below).
  go run ./hack/image -out "$dir/images/nats-operator.tar" >/dev/null
  # The client pods of test/realnode.
  CGO_ENABLED=0 go build -trimpath -o "$dir/natsprobe" ./test/realnode/cmd/natsprobe
  "$dir/nodeimage" -binary "$dir/natsprobe" -path /natsprobe -tag "$PROBE_IMAGE" -user 65532:65532 \
    -out "$dir/images/natsprobe.tar"
) || { log "building the images failed"; exit 1; }

# Certificates and credentials: one CA for the API server's serving and
# client certificates; static tokens for the components and the
# administrator (in the API server's token file).
pki="$dir/pki"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 2 \
  -subj "/CN=realnode-ca" 2>/dev/null
cat > "$pki/apiserver.ext" <<EOF
subjectAltName=DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP,IP:$KUBERNETES_SVC_IP
extendedKeyUsage=serverAuth
EOF
openssl req -newkey rsa:2048 -nodes -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr" -subj "/CN=kube-apiserver" 2>/dev/null
openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
  -out "$pki/apiserver.crt" -days 2 -extfile "$pki/apiserver.ext" 2>/dev/null
printf 'extendedKeyUsage=clientAuth\n' > "$pki/client.ext"
openssl req -newkey rsa:2048 -nodes -keyout "$pki/apiserver-kubelet-client.key" -out "$pki/apiserver-kubelet-client.csr" \
  -subj "/CN=kube-apiserver" 2>/dev/null
openssl x509 -req -in "$pki/apiserver-kubelet-client.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
  -out "$pki/apiserver-kubelet-client.crt" -days 2 -extfile "$pki/client.ext" 2>/dev/null
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
: > "$pki/tokens.csv"
kubeconfig() { # NAME USER GROUPS
  local token; token="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  echo "$token,$2,$2,\"$3\"" >> "$pki/tokens.csv"
  cat > "$dir/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: realnode
  cluster:
    server: https://$NODE_IP:6443
    certificate-authority: $pki/ca.crt
users:
- name: $2
  user:
    token: $token
contexts:
- name: realnode
  context: {cluster: realnode, user: $2}
current-context: realnode
EOF
}
kubeconfig admin admin system:masters
kubeconfig kubelet "system:node:$NODE_NAME" system:nodes
kubeconfig kube-proxy system:kube-proxy ""
kubeconfig kube-controller-manager system:kube-controller-manager ""
kubeconfig kube-scheduler system:kube-scheduler ""

cat > "$dir/containerd.toml" <<EOF
version = 3
root = "$dir/containerd/root"
state = "$dir/containerd/state"
[grpc]
  address = "$dir/containerd/containerd.sock"
[plugins.'io.containerd.cri.v1.runtime']
  # No CAP_SYS_RESOURCE here: the kubelet's negative oom_score_adj (-998
  # for sandboxes) would fail every pod in runc; clamped to this
  # process's own.
  restrict_oom_score_adj = true
  # The pods' network namespaces under the state directory, not in the
  # machine's /var/run/netns.
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runc'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = 'io.containerd.runc.v2'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = '/usr/sbin/runc'
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ['/usr/lib/cni']
    conf_dir = '$dir/cni/net.d'
[plugins.'io.containerd.cri.v1.images']
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = '$PAUSE_IMAGE'
[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
EOF

cat > "$dir/cni/net.d/10-realnode.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "realnode",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$dir/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}
EOF

cat > "$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 only (kubelet 1.37 refuses it unless told).
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
failSwapOn: false
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
rootDir: $dir/kubelet
staticPodPath: ""
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: Webhook}
clusterDNS: ["$NODE_IP"]
clusterDomain: cluster.local
resolvConf: "$dir/pod-resolv.conf"
# The node's disk is the machine's; the test pods are few and small.
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 60
EOF

cat > "$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $dir/kube-proxy.kubeconfig
mode: iptables
clusterCIDR: $CLUSTER_CIDR
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  # Not the VM-wide conntrack sysctls.
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF

cat > "$dir/Corefile" <<EOF
.:53 {
    errors
    health 127.0.0.1:8180
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $dir/admin.kubeconfig realnode
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
}
EOF

# Volumes: a default StorageClass without a provisioner and local
# PersistentVolumes on the node, bound by kube-controller-manager's
# volume binder when the scheduler places a claim's pod (as on a
# production cluster with statically provisioned local disks).
{
  cat <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
allowVolumeExpansion: false
EOF
  for i in $(seq -w 1 24); do
    mkdir -p "$dir/pv/pv$i"
    cat <<EOF
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: local-pv$i
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local
  local: {path: "$dir/pv/pv$i"}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [$NODE_NAME]}
EOF
  done
} > "$dir/storage.yaml"

# cleanup removes what the PID namespace's end leaves: the cgroups the
# kubelet and runc made, then checks that nothing of the stack is left.
cleanup() {
  local rc=$?
  set +e
  local h left=0 i
  # The kernel kills the namespace's processes as its init ends; wait
  # (up to 10 s) until the pods' cgroups hold none.
  for i in $(seq 20); do
    [[ -z "$(cat /sys/fs/cgroup/*/kubepods/cgroup.procs /sys/fs/cgroup/*/kubepods/*/cgroup.procs /sys/fs/cgroup/*/kubepods/*/*/cgroup.procs /sys/fs/cgroup/*/kubepods/*/*/*/cgroup.procs 2>/dev/null)" ]] && break
    sleep 0.5
  done
  for h in /sys/fs/cgroup/*/; do
    for cg in kubepods; do
      if [[ -d "$h$cg" ]]; then
        # Deepest first; a cgroup with a process left in it is reported.
        find "$h$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
        [[ -d "$h$cg" ]] && { log "cgroup $h$cg is still there: $(find "$h$cg" -name cgroup.procs -exec cat {} + | head)"; left=1; }
      fi
    done
  done
  if grep -q "$dir" /proc/mounts; then
    log "mounts left: $(grep "$dir" /proc/mounts | head)"; left=1
  fi
  if [[ -d /var/run/netns ]] && ls /var/run/netns | grep -q '^cni-'; then
    log "network namespaces left in /var/run/netns: $(ls /var/run/netns | head)"; left=1
  fi
  if pgrep -f "$dir" >/dev/null; then
    log "processes left: $(pgrep -af "$dir" | head)"; left=1
  fi
  if (( rc == 0 && left == 0 )) && [[ -z "${REALNODE_KEEP:-}" ]]; then
    rm -rf "$dir"
  else
    log "kept $dir (logs in $dir/logs)"
  fi
  (( left == 0 )) && log "nothing of the stack is left (processes, mounts, cgroups)"
  exit $(( rc != 0 ? rc : left ))
}
# stop ends the PID namespace at once: unshare, told to stop, kills its
# child, the namespace's init, and the kernel then kills every process
# in the namespace (the pods' containers and shims included).
stop() {
  if [[ -n "${unshare_pid:-}" ]] && kill -0 "$unshare_pid" 2>/dev/null; then
    log "stopping the node (signal)"
    kill -TERM "$unshare_pid" 2>/dev/null
    wait "$unshare_pid" 2>/dev/null
  fi
  exit 130
}
trap cleanup EXIT
trap stop INT TERM HUP

# A new PID namespace (its end kills every process of the stack), network
# namespace (traffic stays inside), mount namespace (mounts stay inside)
# and UTS namespace (the node's hostname).
unshare --pid --fork --kill-child --mount-proc --net --mount --uts --propagation private \
  bash "$REPO_ROOT/hack/realnode.sh" --inner "$dir" "$@" &
unshare_pid=$!
wait "$unshare_pid"
