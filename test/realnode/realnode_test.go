package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

func intOrString(port int32) intstr.IntOrString { return intstr.FromInt32(port) }

const (
	ns    = "nats"  // the cluster's namespace
	apps  = "apps"  // the apps' namespace, admitted by clientsFrom later
	other = "other" // a namespace nothing admits
)

// The whole suite is one ordered story on one cluster, as a user's
// cluster lives: each step starts from where the last one left it, so the
// node runs each scenario once (the node has 2 CPUs; a cluster of its own
// per scenario would double the suite's time).
func TestRealNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	defer keptLogs(ctx, t, "nats-system", ns, apps, other)
	for _, n := range []string{ns, apps, other} {
		createNamespace(ctx, t, n)
	}
	s := &story{ctx: ctx}
	for _, step := range []struct {
		name string
		run  func(*testing.T)
		// needed: the rest cannot run without it.
		needed bool
	}{
		{"ControllerDeploymentWithLeaderElection", s.install, true},
		{"ExampleClusterRunsRestricted", s.create, true},
		{"NetworkPolicyDefaultRules", s.defaultPolicy, false},
		{"NetworkPolicyClientsFromAnotherNamespace", s.clientsFrom, false},
		{"ConfigChangeAppliedByReload", s.reload, false},
		{"RollingUpgradeUnderAPublisher", s.upgrade, false},
		{"Scale3To5To3", s.scale, false},
		{"ReplaceAServer", s.replace, false},
		{"BackupAndRestoreJobs", s.backupRestore, false},
	} {
		if !t.Run(step.name, step.run) && step.needed {
			t.Fatalf("%s failed: the later steps need it", step.name)
		}
	}
}

// story is what the steps hand on.
type story struct {
	ctx context.Context
	// probes by namespace: a client pod in the cluster's namespace, in
	// apps and in other.
	probes map[string]*probe
}

// install applies manifests/ as a user does (kubectl apply -k), the
// controller's image imported under the tag the Deployment names; waits
// for both replicas and checks one holds the leader Lease.
func (s *story) install(t *testing.T) {
	start := time.Now()
	kubectl(t, "apply", "--server-side", "-k", filepath.Join(repoRoot, "manifests"))
	kubectl(t, "-n", "nats-system", "rollout", "status", "deployment/nats-operator", "--timeout=5m")
	var holder string
	poll.Eventually(t, 2*time.Minute, 500*time.Millisecond, "a controller pod to hold the leader Lease", func() error {
		l, err := kube.CoordinationV1().Leases("nats-system").Get(s.ctx, "nats-operator", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("no holder")
		}
		holder = *l.Spec.HolderIdentity
		return nil
	})
	pods, err := kube.CoreV1().Pods("nats-system").List(s.ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nats-operator"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
		for _, c := range p.Status.ContainerStatuses {
			t.Logf("controller pod %s (%s): container %s image %s (%s), ready %v, restarts %d", p.Name, p.Status.PodIP, c.Name, c.Image, c.ImageID, c.Ready, c.RestartCount)
		}
	}
	if len(pods.Items) != 2 || !strings.HasPrefix(holder, "nats-operator-") {
		t.Fatalf("controller pods %v, Lease holder %q: want 2 pods, one of them the holder", names, holder)
	}
	t.Logf("the controller Deployment: 2 replicas Ready, Lease nats-system/nats-operator held by %s, %s after kubectl apply -k manifests/", holder, time.Since(start).Round(100*time.Millisecond))
}

// create applies the example cluster (nats-server 2.15.1, for the
// upgrade later; lame duck grace 1s as every test cluster) and waits
// until it is Ready, Settled and UpToDate, then checks the servers run as
// the restricted securityContext says, on the processes themselves.
func (s *story) create(t *testing.T) {
	obj, err := framework.ExampleObject("natscluster-jetstream.yaml", "NatsCluster")
	if err != nil {
		t.Fatal(err)
	}
	obj.Object["spec"].(map[string]any)["version"] = "2.15.1"
	obj.Object["spec"].(map[string]any)["lameDuck"] = map[string]any{"gracePeriod": framework.TestLameDuckGracePeriod}
	raw, err := yaml.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	kubectlIn(t, string(raw), "apply", "-n", ns, "-f", "-")
	nc, _ := waitSettled(s.ctx, t, ns, "demo", 6*time.Minute)
	t.Logf("the example cluster (3 servers, 2.15.1) Ready, Settled and UpToDate %s after kubectl apply: %s",
		time.Since(start).Round(100*time.Millisecond), framework.Conditions(nc))

	pods, err := kube.CoreV1().Pods(ns).List(s.ctx, metav1.ListOptions{LabelSelector: "cluster.nats-operator.io/cluster=demo"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if !c.Ready || c.State.Running == nil {
				t.Errorf("pod %s container %s: ready %v, state %+v", p.Name, c.Name, c.Ready, c.State)
			}
		}
		t.Logf("pod %s on %s, IP %s, claim %s", p.Name, p.Spec.NodeName, p.Status.PodIP, claimOf(&p))
	}
	// The servers' processes, as the kernel sees them (the node's PID
	// namespace is this test's): each runs as uid 1000 with no
	// capabilities, no new privileges, and its root filesystem read-only.
	procs := processes(t, "nats-server")
	if len(procs) != 3 {
		t.Fatalf("%d nats-server processes on the node, want 3", len(procs))
	}
	for _, pid := range procs {
		status := procFile(t, pid, "status")
		uid, capEff, noNewPrivs := field(status, "Uid:"), field(status, "CapEff:"), field(status, "NoNewPrivs:")
		root := rootMount(procFile(t, pid, "mountinfo"))
		t.Logf("nats-server pid %d: Uid %s, CapEff %s, NoNewPrivs %s, root mount %q", pid, uid, capEff, noNewPrivs, root)
		if !strings.HasPrefix(uid, "1000\t") || capEff != "0000000000000000" || noNewPrivs != "1" || !strings.Contains(" "+root+",", " ro,") {
			t.Errorf("nats-server pid %d does not run restricted: Uid %q CapEff %q NoNewPrivs %q root %q", pid, uid, capEff, noNewPrivs, root)
		}
	}
}

func claimOf(p *corev1.Pod) string {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return "(none)"
}

// processes returns the PIDs of the processes of that name on the node.
func processes(t testing.TB, name string) []int {
	t.Helper()
	out, _ := exec.Command("pgrep", "-x", name).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func procFile(t testing.TB, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// field is the value of a "Key:\tvalue" line of /proc/<pid>/status.
func field(status, key string) string {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// rootMount is the mount options of / in a mountinfo.
func rootMount(mountinfo string) string {
	for _, l := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && f[4] == "/" {
			return f[5]
		}
	}
	return ""
}

const (
	clientAddr = "demo.nats.svc.cluster.local:4222"
)

// serverIP is a server pod's address.
func serverIP(ctx context.Context, t testing.TB, pod string) string {
	t.Helper()
	p, err := kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Status.PodIP
}

// defaultPolicy checks the default NetworkPolicy as enforced by
// kube-router: clients of the cluster's own namespace reach the client
// port, clients of another namespace do not; the monitoring port is
// closed to every pod but the controller's, the metrics port to every pod
// (metricsFrom is empty).
func (s *story) defaultPolicy(t *testing.T) {
	s.probes = map[string]*probe{}
	for _, n := range []string{ns, apps, other} {
		s.probes[n] = startProbe(s.ctx, t, n, "client", map[string]string{"app": "client"})
	}
	ip := serverIP(s.ctx, t, "demo-0-0")
	expect(t, s.probes[ns], "the client port from the cluster's namespace", s.probes[ns].nats(t, clientAddr), true)
	expect(t, s.probes[other], "the client port from another namespace", s.probes[other].nats(t, clientAddr), false)
	expect(t, s.probes[ns], "the monitoring port from a client pod", s.probes[ns].http(t, "http://"+ip+":8222/varz"), false)
	expect(t, s.probes[ns], "the metrics port (metricsFrom empty)", s.probes[ns].http(t, "http://"+ip+":7777/metrics"), false)
	expect(t, s.probes[other], "the route port from another namespace", s.probes[other].nats(t, ip+":6222"), false)
	// The controller reads the monitoring port (it is Settled only from
	// what /healthz and /jsz report there): the cluster still settles.
	nc, _ := waitSettled(s.ctx, t, ns, "demo", time.Minute)
	t.Logf("the controller still reads every server's monitoring port: %s", framework.Conditions(nc))
}

// expect logs a probe's result and fails t unless it is what is wanted.
func expect(t testing.TB, p *probe, what string, r probeResult, ok bool) {
	t.Helper()
	if r.OK {
		t.Logf("%s (pod %s/%s): connected: %s", what, p.ns, p.name, r.Detail)
	} else {
		t.Logf("%s (pod %s/%s): refused: %s", what, p.ns, p.name, r.Error)
	}
	if r.OK != ok {
		t.Errorf("%s: connected %v, want %v", what, r.OK, ok)
	}
}

const clientsFromApps = `{"spec":{"networkPolicy":{"clientsFrom":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"apps"}}}]}}}`

// clientsFrom admits the apps namespace only (the README's example): apps
// reaches the client port; a client pod of the cluster's own namespace no
// longer does; the controller and the cluster's Jobs still do (the
// reload, scale, replace and backup steps after this one run so).
func (s *story) clientsFrom(t *testing.T) {
	patchCluster(s.ctx, t, ns, "demo", clientsFromApps)
	poll.Eventually(t, time.Minute, 500*time.Millisecond, "the NetworkPolicy to admit apps", func() error {
		np, err := kube.NetworkingV1().NetworkPolicies(ns).Get(s.ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !strings.Contains(fmt.Sprint(np.Spec.Ingress), "apps") {
			return fmt.Errorf("ingress %+v", np.Spec.Ingress)
		}
		return nil
	})
	// kube-router follows the object within a few seconds.
	poll.Eventually(t, time.Minute, time.Second, "kube-router to admit apps", func() error {
		if r := s.probes[apps].nats(t, clientAddr); !r.OK {
			return fmt.Errorf("%s", r.Error)
		}
		return nil
	})
	expect(t, s.probes[apps], "the client port from apps (clientsFrom)", s.probes[apps].nats(t, clientAddr), true)
	poll.Eventually(t, time.Minute, time.Second, "kube-router to refuse the cluster's namespace", func() error {
		if r := s.probes[ns].nats(t, clientAddr); r.OK {
			return fmt.Errorf("still admitted")
		}
		return nil
	})
	expect(t, s.probes[ns], "the client port from the cluster's namespace, clientsFrom apps", s.probes[ns].nats(t, clientAddr), false)
	expect(t, s.probes[other], "the client port from another namespace, clientsFrom apps", s.probes[other].nats(t, clientAddr), false)
}

// reload changes a setting every server reloads (serverTags) and times it
// from the patch to UpToDate with appliedBy Reload, no pod restarted: the
// controller reaches every server's client port ($SYS) through the
// NetworkPolicy, and the kubelet's real ConfigMap refresh is waited for
// once (the staged reload).
func (s *story) reload(t *testing.T) {
	before := podUIDs(s.ctx, t)
	start := time.Now()
	patchCluster(s.ctx, t, ns, "demo", `{"spec":{"serverTags":{"realnode":"reload"}}}`)
	var nc *clusterv1beta1.NatsCluster
	poll.Eventually(t, 6*time.Minute, 250*time.Millisecond, "the config change applied by reload", func() error {
		got, err := cluster(s.ctx, ns, "demo")
		if err != nil {
			return err
		}
		nc = got
		if err := framework.CheckSettledUpToDate(got); err != nil {
			return err
		}
		if got.Status.Config == nil || got.Status.Config.AppliedBy != clusterv1beta1.AppliedByReload {
			return fmt.Errorf("status.config %+v", got.Status.Config)
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("serverTags change: UpToDate with status.config %+v %s after the patch (3 servers, the kubelet's ConfigMap refresh included)", *nc.Status.Config, took.Round(100*time.Millisecond))
	if evs, err := kube.CoreV1().Events(ns).List(s.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=demo,reason=ServerReloaded"}); err == nil {
		for _, e := range evs.Items {
			t.Logf("Event %s %s: %s", e.Reason, e.LastTimestamp.Format(time.TimeOnly), e.Message)
		}
	}
	if after := podUIDs(s.ctx, t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("pods restarted by a reload: before %v, after %v", before, after)
	}
}

// podUIDs maps each server's pod to its UID.
func podUIDs(ctx context.Context, t testing.TB) map[string]string {
	t.Helper()
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "cluster.nats-operator.io/cluster=demo"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = string(p.UID)
	}
	return out
}

// podURLs are nats://<pod IP>:4222 of the cluster's pods: this test runs
// on the node, which the NetworkPolicy admits (kube-router lets a node
// reach its own pods, as kubelet probes need).
func podURLs(ctx context.Context, t testing.TB, cluster string) []string {
	t.Helper()
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "cluster.nats-operator.io/cluster=" + cluster})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, p := range pods.Items {
		if p.Status.PodIP != "" {
			urls = append(urls, "nats://"+p.Status.PodIP+":4222")
		}
	}
	return urls
}

// upgrade rolls 2.15.1 -> 2.15.2 one server at a time while a publisher
// writes to an R3 stream without pause; no acknowledged message is lost.
func (s *story) upgrade(t *testing.T) {
	conn := framework.Connect(t, podURLs(s.ctx, t, "demo"))
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	framework.CreateStream(s.ctx, t, js, "ORDERS", 3)
	pub := framework.StartPublisher(s.ctx, js, "ORDERS.new")
	poll.Eventually(t, time.Minute, 100*time.Millisecond, "the publisher to get 200 acknowledgements", func() error {
		if n, attempts, failures, err := pub.Stats(); n < 200 {
			return fmt.Errorf("%d acked, %d attempts, %d failed, last error %v", n, attempts, failures, err)
		}
		return nil
	})
	start := time.Now()
	patchCluster(s.ctx, t, ns, "demo", `{"spec":{"version":"2.15.2"}}`)
	poll.Eventually(t, 10*time.Minute, 500*time.Millisecond, "every server on 2.15.2", func() error {
		nc, err := cluster(s.ctx, ns, "demo")
		if err != nil {
			return err
		}
		if nc.Status.Version != "2.15.2" {
			return fmt.Errorf("status.version %q", nc.Status.Version)
		}
		return framework.CheckSettledUpToDate(nc)
	})
	t.Logf("2.15.1 -> 2.15.2: every server restarted and Settled %s after the patch", time.Since(start).Round(100*time.Millisecond))
	if evs, err := kube.CoreV1().Events(ns).List(s.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=demo,reason=ServerRestarted"}); err == nil {
		for _, e := range evs.Items {
			t.Logf("Event %s %s: %s", e.Reason, e.LastTimestamp.Format(time.TimeOnly), e.Message)
		}
	}
	checkNoLoss(s.ctx, t, "demo", "ORDERS", pub)
}

// checkNoLoss stops the publisher and reads the stream back on a new
// connection: every acknowledged message must be in it.
func checkNoLoss(ctx context.Context, t testing.TB, cluster, stream string, pub *framework.Publisher) {
	t.Helper()
	acked := pub.Stop()
	_, attempts, failures, lastErr := pub.Stats()
	reader := &framework.StreamReader{Stream: stream}
	poll.Eventually(t, 2*time.Minute, time.Second, "reading "+stream+" back", func() error {
		return withJetStream(ctx, t, cluster, func(js jetstream.JetStream) error { return reader.Read(ctx, js) })
	})
	lost := 0
	for id := range acked {
		if !reader.IDs[id] {
			lost++
		}
	}
	t.Logf("publisher on %s: %d acknowledged, %d attempts (%d failed and retried, the last: %v); the stream holds %d messages; lost %d",
		stream, len(acked), attempts, failures, lastErr, reader.Total, lost)
	if lost != 0 {
		t.Errorf("%d acknowledged messages are missing from %s", lost, stream)
	}
}

// scale grows the cluster to 5 servers and back to 3 (the scale-down
// moves nothing: ORDERS is R3 on the servers that stay or moves off, and
// removes each server's JetStream peer over $SYS), the stream intact.
func (s *story) scale(t *testing.T) {
	for _, n := range []int{5, 3} {
		start := time.Now()
		patchCluster(s.ctx, t, ns, "demo", fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
		nc, _ := waitSettled(s.ctx, t, ns, "demo", 8*time.Minute)
		if len(nc.Status.Servers) != n {
			t.Fatalf("status.servers %+v, want %d", nc.Status.Servers, n)
		}
		if uids := podUIDs(s.ctx, t); len(uids) != n {
			t.Fatalf("%d server pods, want %d", len(uids), n)
		}
		t.Logf("scaled to %d: Ready, Settled and UpToDate %s after the patch", n, time.Since(start).Round(100*time.Millisecond))
	}
	streamState(s.ctx, t, "demo", "ORDERS")
}

// streamState logs a stream's state and replicas.
func streamState(ctx context.Context, t testing.TB, cluster, stream string) *jetstream.StreamInfo {
	t.Helper()
	var info *jetstream.StreamInfo
	poll.Eventually(t, time.Minute, time.Second, "the state of "+stream, func() error {
		return withJetStream(ctx, t, cluster, func(js jetstream.JetStream) error {
			st, err := js.Stream(ctx, stream)
			if err != nil {
				return err
			}
			info, err = st.Info(ctx)
			return err
		})
	})
	var replicas []string
	if info.Cluster != nil {
		replicas = append(replicas, info.Cluster.Leader+" (leader)")
		for _, r := range info.Cluster.Replicas {
			replicas = append(replicas, fmt.Sprintf("%s current=%v", r.Name, r.Current))
		}
	}
	t.Logf("stream %s on %s: %d messages, last sequence %d, replicas %v", stream, cluster, info.State.Msgs, info.State.LastSeq, replicas)
	return info
}

// replace replaces demo-1 by an empty server (its claim new), which
// catches up ORDERS from the other two.
func (s *story) replace(t *testing.T) {
	// The reads of ORDERS above left their ordered consumers (R1, on any
	// server, gone after 5 minutes idle): one on demo-1 would rightly hold
	// the replace (ReplaceBlocked: it must move first). They are the
	// test's own; delete them.
	deleteConsumers(s.ctx, t, "demo", "ORDERS")
	before := streamState(s.ctx, t, "demo", "ORDERS")
	oldClaim, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(s.ctx, "data-demo-1-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	kubectl(t, "-n", ns, "annotate", "natscluster", "demo", clusterv1beta1.AnnotationReplaceServer+"=demo-1")
	poll.Eventually(t, 8*time.Minute, 500*time.Millisecond, "demo-1 replaced and the annotation cleared", func() error {
		nc, err := cluster(s.ctx, ns, "demo")
		if err != nil {
			return err
		}
		if _, ok := nc.Annotations[clusterv1beta1.AnnotationReplaceServer]; ok {
			return fmt.Errorf("annotation still set; removals %+v; %s", nc.Status.Removals, framework.Conditions(nc))
		}
		return framework.CheckSettledUpToDate(nc)
	})
	newClaim, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(s.ctx, "data-demo-1-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if newClaim.UID == oldClaim.UID {
		t.Errorf("demo-1 kept its claim %s (volume %s)", oldClaim.UID, oldClaim.Spec.VolumeName)
	}
	t.Logf("demo-1 replaced %s after the annotation: claim data-demo-1-0 on volume %s, was %s",
		time.Since(start).Round(100*time.Millisecond), newClaim.Spec.VolumeName, oldClaim.Spec.VolumeName)
	after := streamState(s.ctx, t, "demo", "ORDERS")
	if after.State.Msgs != before.State.Msgs || after.State.LastSeq != before.State.LastSeq {
		t.Errorf("ORDERS before the replace %+v, after %+v", before.State, after.State)
	}
}

// backupRestore runs a NatsBackup (one run, now) of demo into a claim,
// with clientsFrom admitting apps only: its Job, in the cluster's
// namespace, still reaches the servers. A NatsRestore of that run into a
// new 3-server cluster brings ORDERS back with every message.
func (s *story) backupRestore(t *testing.T) {
	orders := streamState(s.ctx, t, "demo", "ORDERS")
	restored, err := framework.ExampleObject("natscluster-jetstream.yaml", "NatsCluster")
	if err != nil {
		t.Fatal(err)
	}
	restored.SetName("restored")
	// Three servers, as the backed-up cluster: nats-server refuses an R3
	// stream on a single server ("replicas > 1 not supported in
	// non-clustered mode"), and the restore Job reports so.
	spec := restored.Object["spec"].(map[string]any)
	spec["lameDuck"] = map[string]any{"gracePeriod": framework.TestLameDuckGracePeriod}
	raw, err := yaml.Marshal(restored.Object)
	if err != nil {
		t.Fatal(err)
	}
	kubectlIn(t, string(raw), "apply", "-n", ns, "-f", "-")

	if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(s.ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "backups"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := natsAPI.ClusterV1beta1().NatsBackups(ns).Create(s.ctx, &clusterv1beta1.NatsBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "now"},
		Spec:       clusterv1beta1.NatsBackupSpec{Cluster: "demo", Volume: clusterv1beta1.BackupVolume{ClaimName: "backups"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var run clusterv1beta1.BackupRun
	poll.Eventually(t, 5*time.Minute, time.Second, "NatsBackup now to succeed", func() error {
		b, err := natsAPI.ClusterV1beta1().NatsBackups(ns).Get(s.ctx, "now", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(b.Status.Conditions, clusterv1beta1.ConditionComplete)
		if c == nil || c.Status != metav1.ConditionTrue || len(b.Status.Runs) == 0 {
			return fmt.Errorf("phase %s, Complete %+v, last run %+v", b.Status.Phase, c, b.Status.LastRun)
		}
		run = b.Status.Runs[0]
		t.Logf("NatsBackup now: Complete %s: %s (%s after it was made)", c.Reason, c.Message, time.Since(start).Round(100*time.Millisecond))
		return nil
	})
	if len(run.Streams) != 1 || run.Streams[0].Name != "ORDERS" || run.Streams[0].Messages != orders.State.Msgs {
		t.Fatalf("run %s holds %+v, want ORDERS with %d messages", run.Job, run.Streams, orders.State.Msgs)
	}

	waitSettled(s.ctx, t, ns, "restored", 5*time.Minute)
	start = time.Now()
	if _, err := natsAPI.ClusterV1beta1().NatsRestores(ns).Create(s.ctx, &clusterv1beta1.NatsRestore{
		ObjectMeta: metav1.ObjectMeta{Name: "from-now"},
		Spec:       clusterv1beta1.NatsRestoreSpec{Cluster: "restored", Backup: "now", Run: run.Job},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, 5*time.Minute, time.Second, "NatsRestore from-now to succeed", func() error {
		r, err := natsAPI.ClusterV1beta1().NatsRestores(ns).Get(s.ctx, "from-now", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r.Status.Phase == clusterv1beta1.BackupFailed {
			t.Fatalf("NatsRestore from-now failed: %+v", r.Status.Conditions)
		}
		if r.Status.Phase != clusterv1beta1.BackupSucceeded {
			return fmt.Errorf("phase %q, conditions %+v", r.Status.Phase, r.Status.Conditions)
		}
		t.Logf("NatsRestore from-now: %s %s after it was made", r.Status.Phase, time.Since(start).Round(100*time.Millisecond))
		return nil
	})
	got := streamState(s.ctx, t, "restored", "ORDERS")
	if got.State.Msgs != orders.State.Msgs || got.State.LastSeq != orders.State.LastSeq {
		t.Errorf("restored ORDERS %+v, backed up %+v", got.State, orders.State)
	}
}

// deleteConsumers deletes every consumer of a stream.
func deleteConsumers(ctx context.Context, t testing.TB, cluster, stream string) {
	t.Helper()
	conn, err := nats.Connect(strings.Join(podURLs(ctx, t, cluster), ","), nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	names := st.ConsumerNames(ctx)
	for name := range names.Name() {
		if err := st.DeleteConsumer(ctx, name); err != nil {
			t.Fatalf("deleting consumer %s of %s: %v", name, stream, err)
		}
		t.Logf("deleted the test's consumer %s of %s", name, stream)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
}

// withJetStream runs f on a new connection to the cluster's pods, closed
// after it: a read after restarts must not sit on a client that followed
// them.
func withJetStream(ctx context.Context, t testing.TB, cluster string, f func(jetstream.JetStream) error) error {
	t.Helper()
	conn, err := nats.Connect(strings.Join(podURLs(ctx, t, cluster), ","), nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer conn.Close()
	js, err := jetstream.New(conn)
	if err != nil {
		return err
	}
	return f(js)
}
