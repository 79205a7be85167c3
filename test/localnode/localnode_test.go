package localnode_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

const natsImage = "nats:2.15.2"

func TestMain(m *testing.M) {
	klog.InitFlags(nil)
	if v := os.Getenv("LOCALNODE_V"); v != "" {
		_ = flag.Set("v", v)
	}
	flag.Parse()
	os.Exit(m.Run())
}

// startNode starts a node for the test; cleanup stops it and checks that
// every process it started is gone.
func startNode(t *testing.T, env *testenv.Env, name string) *localnode.Node {
	t.Helper()
	node, _ := startNodeAt(t, env, name)
	return node
}

// startNodeAt is startNode that also returns the node's root directory.
func startNodeAt(t *testing.T, env *testenv.Env, name string) (*localnode.Node, string) {
	t.Helper()
	root := t.TempDir()
	node, err := localnode.New(env.Config, localnode.Options{Root: root, NodeName: name})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		node.Stop()
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(root, "logs", "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("tail of %s:\n%s", filepath.Base(l), tail(string(b), 1500))
			}
		}
		pids := node.PIDs()
		if alive := waitDead(pids, 5*time.Second); len(alive) > 0 {
			t.Errorf("processes outlived the node: %v", alive)
		} else {
			t.Logf("all %d processes the node started are gone", len(pids))
		}
	})
	return node, root
}

// waitDead waits for every pid to be gone and returns those still alive.
func waitDead(pids []int, timeout time.Duration) []int {
	var alive []int
	_, _ = poll.Until(timeout, 50*time.Millisecond, func() error {
		alive = nil
		for _, p := range pids {
			if localnode.ProcessAlive(p) {
				alive = append(alive, p)
			}
		}
		if len(alive) > 0 {
			return fmt.Errorf("%d alive", len(alive))
		}
		return nil
	})
	return alive
}

func createNamespace(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	_, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// serverConfig renders the JSON config of server i of a three-server
// cluster, as the controller would.
func serverConfig(ns string, i int, extra string) string {
	var routes []string
	for j := 0; j < 3; j++ {
		routes = append(routes, fmt.Sprintf(`"nats://demo-%d-0.demo-headless.%s.svc:6222"`, j, ns))
	}
	return fmt.Sprintf(`{
  "server_name": "demo-%d",
  "listen": "0.0.0.0:4222",
  "http": "0.0.0.0:8222",
  "pid_file": "/var/run/nats/nats.pid",
  "lame_duck_grace_period": "1s",
  "lame_duck_duration": "30s",%s
  "jetstream": {"store_dir": "/data/jetstream", "max_memory_store": 67108864, "max_file_store": 1073741824},
  "cluster": {"name": "demo", "listen": "0.0.0.0:6222", "routes": [%s]}
}`, i, extra, strings.Join(routes, ", "))
}

func httpProbe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("monitor")}},
		PeriodSeconds:    period,
		FailureThreshold: failures,
		TimeoutSeconds:   2,
	}
}

// serverStatefulSet is a one-replica StatefulSet running server i.
func serverStatefulSet(i int) *appsv1.StatefulSet {
	name := fmt.Sprintf("demo-%d", i)
	labels := map[string]string{"app": "demo", "server": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](1),
			ServiceName:         "demo-headless",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					Containers: []corev1.Container{{
						Name:    "nats",
						Image:   natsImage,
						Command: []string{"nats-server", "--config", "/etc/nats-config/nats.conf"},
						Env: []corev1.EnvVar{
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
						},
						Ports: []corev1.ContainerPort{
							{Name: "client", ContainerPort: 4222},
							{Name: "cluster", ContainerPort: 6222},
							{Name: "monitor", ContainerPort: 8222},
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/etc/nats-config"},
							{Name: "data", MountPath: "/data"},
							{Name: "pid", MountPath: "/var/run/nats"},
						},
						StartupProbe:   httpProbe("/healthz?js-enabled-only=true", 1, 60),
						LivenessProbe:  httpProbe("/healthz?js-enabled-only=true", 5, 3),
						ReadinessProbe: httpProbe("/healthz?js-server-only=true", 1, 3),
						Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
							Command: []string{"nats-server", "--signal", "ldm=/var/run/nats/nats.pid"},
						}}},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"},
						}}},
						{Name: "pid", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

// jsz is the part of /jsz?streams=true the test reads.
type jsz struct {
	Accounts []struct {
		Streams []struct {
			Name  string `json:"name"`
			State struct {
				Msgs uint64 `json:"messages"`
			} `json:"state"`
			Cluster struct {
				Leader   string `json:"leader"`
				Replicas []struct {
					Name    string `json:"name"`
					Current bool   `json:"current"`
				} `json:"replicas"`
			} `json:"cluster"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// streamState returns the messages of a stream on the server at ip, its
// leader's server name, and whether every peer is current (only the
// leader's view knows).
func streamState(ip, stream string) (uint64, string, bool, error) {
	resp, err := http.Get("http://" + ip + ":8222/jsz?streams=true")
	if err != nil {
		return 0, "", false, err
	}
	defer resp.Body.Close()
	var j jsz
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		return 0, "", false, err
	}
	for _, a := range j.Accounts {
		for _, s := range a.Streams {
			if s.Name != stream {
				continue
			}
			current := len(s.Cluster.Replicas) == 2
			for _, r := range s.Cluster.Replicas {
				current = current && r.Current
			}
			return s.State.Msgs, s.Cluster.Leader, current, nil
		}
	}
	return 0, "", false, fmt.Errorf("server %s has no stream %s", ip, stream)
}

func TestStatefulSetsRunANATSClusterThroughDeletionKillAndConfigEdit(t *testing.T) {
	begin := time.Now()
	env := testenv.Start(t, testenv.Options{ControllerManager: true, SkipCRDs: true})
	t.Logf("control plane up in %s", time.Since(begin).Round(time.Millisecond))
	node := startNode(t, env, "localnode")
	client := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	ns := "demo"
	createNamespace(t, client, ns)

	_, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-headless"},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{"app": "demo"},
			Ports: []corev1.ServicePort{
				{Name: "client", Port: 4222}, {Name: "cluster", Port: 6222}, {Name: "monitor", Port: 8222},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < 3; i++ {
		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("demo-%d-config", i)},
			Data:       map[string]string{"nats.conf": serverConfig(ns, i, "")},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.AppsV1().StatefulSets(ns).Create(ctx, serverStatefulSet(i), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := func() map[string]*corev1.Pod {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil
		}
		m := map[string]*corev1.Pod{}
		for i := range list.Items {
			m[list.Items[i].Name] = &list.Items[i]
		}
		return m
	}
	allReady := func() error {
		ps := pods()
		for i := 0; i < 3; i++ {
			p := ps[fmt.Sprintf("demo-%d-0", i)]
			if p == nil {
				return fmt.Errorf("no pod demo-%d-0", i)
			}
			if p.Status.Phase != corev1.PodRunning || !kubeutil.PodReady(p) || p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s on %q is %s, ready %v: %s", p.Name, p.Spec.NodeName, p.Status.Phase, kubeutil.PodReady(p), describe(p))
			}
		}
		return nil
	}
	took := poll.Eventually(t, 2*time.Minute, 200*time.Millisecond, "three servers Running and Ready", allReady)
	t.Logf("three StatefulSet pods Running and Ready %s after creation", took.Round(time.Millisecond))

	ips := map[string]string{}
	for name, p := range pods() {
		if p.Status.PodIP != node.PodAddress(ns, name) {
			t.Errorf("pod %s reports podIP %s, node says %s", name, p.Status.PodIP, node.PodAddress(ns, name))
		}
		if other, dup := ips[p.Status.PodIP]; dup {
			t.Errorf("pods %s and %s share %s", other, name, p.Status.PodIP)
		}
		ips[p.Status.PodIP] = name
		cs := p.Status.ContainerStatuses[0]
		if !cs.Ready || cs.Started == nil || !*cs.Started || cs.State.Running == nil || !strings.HasPrefix(cs.ImageID, "nats@sha256:") || !strings.HasPrefix(cs.ContainerID, "localnode://") {
			t.Errorf("container status of %s: %+v", name, cs)
		}
		if p.Spec.NodeName != "localnode" {
			t.Errorf("pod %s is on node %q", name, p.Spec.NodeName)
		}
	}
	for i := 0; i < 3; i++ {
		claim, err := client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, fmt.Sprintf("data-demo-%d-0", i), metav1.GetOptions{})
		if err != nil || claim.Status.Phase != corev1.ClaimBound {
			t.Errorf("claim data-demo-%d-0: %v, phase %v", i, err, claim.Status.Phase)
		}
	}
	t.Logf("pod addresses: demo-0-0=%s demo-1-0=%s demo-2-0=%s", node.PodAddress(ns, "demo-0-0"), node.PodAddress(ns, "demo-1-0"), node.PodAddress(ns, "demo-2-0"))

	// Publish 1,000 messages to an R3 stream through a pod address.
	nc, err := nats.Connect("nats://"+node.PodAddress(ns, "demo-0-0")+":4222", nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var stream jetstream.Stream
	poll.Eventually(t, 30*time.Second, 200*time.Millisecond, "creating an R3 stream", func() error {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		stream, err = js.CreateOrUpdateStream(sctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3})
		return err
	})
	start = time.Now()
	for i := 0; i < 1000; i++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.Publish(pctx, fmt.Sprintf("orders.%d", i), []byte("order "+strconv.Itoa(i)),
			jetstream.WithRetryAttempts(40), jetstream.WithRetryWait(100*time.Millisecond))
		cancel()
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	info, err := stream.Info(ctx)
	if err != nil || info.State.Msgs != 1000 {
		t.Fatalf("stream after publishing: %v, %+v", err, info)
	}
	t.Logf("published 1000 messages to the R3 stream in %s", time.Since(start).Round(time.Millisecond))

	// Delete one pod: preStop lame duck, recreated on the same claim.
	victim := pods()["demo-1-0"]
	claimDir := node.ClaimPath(ns, "data-demo-1-0")
	if _, err := os.Stat(filepath.Join(claimDir, "jetstream")); err != nil {
		t.Fatalf("claim directory before deletion: %v", err)
	}
	configBefore := node.VolumePath(ns, "demo-1-0", "config")
	start = time.Now()
	if err := client.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	took = poll.Eventually(t, 90*time.Second, 200*time.Millisecond, "demo-1-0 recreated and Ready", func() error {
		p := pods()["demo-1-0"]
		if p == nil || p.UID == victim.UID {
			return fmt.Errorf("not recreated yet")
		}
		if !kubeutil.PodReady(p) {
			return fmt.Errorf("recreated pod not ready")
		}
		return nil
	})
	t.Logf("deleted pod demo-1-0 recreated and Ready %s after the delete", took.Round(time.Millisecond))
	logBytes, err := os.ReadFile(node.LogPath(ns, "demo-1-0"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logBytes), "Entering lame duck mode") {
		var marks []string
		for _, l := range strings.Split(string(logBytes), "\n") {
			if strings.HasPrefix(l, "localnode:") || strings.Contains(l, "Trapped") || strings.Contains(l, "Exiting") || strings.Contains(l, "ERR") {
				marks = append(marks, l)
			}
		}
		t.Errorf("log of demo-1-0 shows no lame duck mode:\n%s", strings.Join(marks, "\n"))
	} else {
		for _, l := range strings.Split(string(logBytes), "\n") {
			if strings.Contains(l, "lame duck") || strings.Contains(l, "preStop") || strings.Contains(l, "exited with code") || strings.Contains(l, "Server Exiting") || strings.Contains(l, "Trapped") {
				t.Logf("demo-1-0 log: %s", l)
			}
		}
		if !strings.Contains(string(logBytes), "container nats exited with code 0") {
			t.Errorf("the lame-duck server did not exit by itself (code 0)")
		}
	}
	configAfter := node.VolumePath(ns, "demo-1-0", "config")
	conf, err := os.ReadFile(filepath.Join(configAfter, "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if configAfter == configBefore || !strings.Contains(string(conf), filepath.Join(claimDir, "jetstream")) {
		t.Errorf("recreated pod does not use the claim directory %s: config %s:\n%s", claimDir, configAfter, conf)
	}
	took = poll.Eventually(t, 60*time.Second, 200*time.Millisecond, "every replica current with 1000 messages", func() error {
		leader := ""
		for i := 0; i < 3; i++ {
			name := fmt.Sprintf("demo-%d-0", i)
			msgs, l, _, err := streamState(node.PodAddress(ns, name), "ORDERS")
			if err != nil {
				return err
			}
			if msgs != 1000 || l == "" {
				return fmt.Errorf("%s: %d messages, leader %q", name, msgs, l)
			}
			leader = l
		}
		_, _, current, err := streamState(node.PodAddress(ns, leader+"-0"), "ORDERS")
		if err != nil {
			return err
		}
		if !current {
			return fmt.Errorf("leader %s does not see both replicas current", leader)
		}
		return nil
	})
	t.Logf("every replica reports ORDERS current with 1000 messages %s later", took.Round(time.Millisecond))

	// kill -9 of a server: restarted, restartCount up, Ready again.
	pid := node.ContainerPID(ns, "demo-2-0", "nats")
	if pid == 0 {
		t.Fatal("no pid for demo-2-0")
	}
	before := pods()["demo-2-0"].Status.ContainerStatuses[0].RestartCount
	start = time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took = poll.Eventually(t, 60*time.Second, 200*time.Millisecond, "demo-2-0 restarted and Ready", func() error {
		p := pods()["demo-2-0"]
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount <= before || !kubeutil.PodReady(p) {
			return fmt.Errorf("restartCount %d, ready %v", cs.RestartCount, kubeutil.PodReady(p))
		}
		if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 137 {
			return fmt.Errorf("lastState %+v", cs.LastTerminationState)
		}
		return nil
	})
	p := pods()["demo-2-0"]
	t.Logf("kill -9 of demo-2-0 (pid %d): restartCount %d -> %d, lastState exit code %d, Ready again after %s",
		pid, before, p.Status.ContainerStatuses[0].RestartCount, p.Status.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode, took.Round(time.Millisecond))

	// A ConfigMap edit reaches the mounted file within 10 s.
	cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, "demo-0-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["nats.conf"] = serverConfig(ns, 0, `
  "max_payload": 2097152,`)
	mounted := filepath.Join(node.VolumePath(ns, "demo-0-0", "config"), "nats.conf")
	start = time.Now()
	if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	took = poll.Eventually(t, 10*time.Second, 200*time.Millisecond, "ConfigMap edit in the mounted file", func() error {
		b, err := os.ReadFile(mounted)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), `"max_payload": 2097152`) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	t.Logf("ConfigMap edit reached the mounted file %s after %s", mounted, took.Round(time.Millisecond))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func TestTwentyPodsGetDistinctAddresses(t *testing.T) {
	env := testenv.Start(t, testenv.Options{ControllerManager: true, SkipCRDs: true})
	node := startNode(t, env, "localnode")
	client := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	ns := "many"
	createNamespace(t, client, ns)
	cpuStart, wallStart := selfCPU(), time.Now()
	for i := 0; i < 20; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("server-%d", i)},
			Spec: corev1.PodSpec{
				TerminationGracePeriodSeconds: ptr.To[int64](5),
				Containers: []corev1.Container{{
					Name:           "nats",
					Image:          natsImage,
					Args:           []string{"-a", "0.0.0.0", "-p", "4222", "-m", "8222"},
					Ports:          []corev1.ContainerPort{{Name: "monitor", ContainerPort: 8222}},
					ReadinessProbe: httpProbe("/healthz", 1, 3),
				}},
			},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var list *corev1.PodList
	took := poll.Eventually(t, 2*time.Minute, 200*time.Millisecond, "twenty pods Ready", func() error {
		var err error
		list, err = client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for i := range list.Items {
			if kubeutil.PodReady(&list.Items[i]) {
				ready++
			}
		}
		if ready != 20 {
			return fmt.Errorf("%d of 20 ready", ready)
		}
		return nil
	})
	t.Logf("twenty pods Ready %s after creation; the test process used %s CPU meanwhile (%.0f%% of one core)",
		took.Round(time.Millisecond), (selfCPU() - cpuStart).Round(time.Millisecond), 100*(selfCPU()-cpuStart).Seconds()/time.Since(wallStart).Seconds())
	seen := map[string]string{}
	var addrs []string
	for _, p := range list.Items {
		if other, dup := seen[p.Status.PodIP]; dup || p.Status.PodIP == "" {
			t.Errorf("pod %s has address %q, also given to %q", p.Name, p.Status.PodIP, other)
		}
		seen[p.Status.PodIP] = p.Name
		addrs = append(addrs, p.Status.PodIP)
	}
	t.Logf("20 distinct addresses: %s", strings.Join(addrs, " "))

	// The node's own CPU and memory while they run, and the servers'.
	cpu0, wall0 := selfCPU(), time.Now()
	time.Sleep(5 * time.Second)
	cpu1, wall1 := selfCPU(), time.Now()
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var serversRSS int64
	for _, p := range list.Items {
		serversRSS += rssKB(node.ContainerPID(ns, p.Name, "nats"))
	}
	t.Logf("test process (node + control-plane clients) over 5s with 20 servers running: CPU %.1f%% of one core, RSS %d MiB (max %d MiB); 20 nats-server processes: RSS %d MiB total",
		100*(cpu1-cpu0).Seconds()/wall1.Sub(wall0).Seconds(), rssKB(os.Getpid())/1024, ru.Maxrss/1024, serversRSS/1024)
}

// selfCPU returns the CPU time (user+system) of this process.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssKB returns the resident set size of pid in KiB.
func rssKB(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// The child side of TestNoProcessOutlivesTheTest: runs a node with one
// server pod, prints the pids, then fails an assertion or waits to be
// killed.
func TestChildNode(t *testing.T) {
	kubeconfig := os.Getenv("LOCALNODE_CHILD_KUBECONFIG")
	if kubeconfig == "" {
		t.Skip("run by TestNoProcessOutlivesTheTest")
	}
	mode := os.Getenv("LOCALNODE_CHILD_MODE")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	nodeName := "child-" + mode
	node, err := localnode.New(cfg, localnode.Options{Root: t.TempDir(), NodeName: nodeName})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Stop)
	client := kubernetes.NewForConfigOrDie(cfg)
	ns := "child-" + mode
	createNamespace(t, client, ns)
	// No kube-controller-manager here to make the default ServiceAccount
	// and publish the kube-root-ca.crt ConfigMap, which the
	// ServiceAccount admission plugin's volume needs.
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ca := cfg.TLSClientConfig.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(cfg.TLSClientConfig.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": string(ca)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "server"},
		Spec: corev1.PodSpec{
			NodeName: nodeName,
			Containers: []corev1.Container{{
				Name:           "nats",
				Image:          natsImage,
				Args:           []string{"-a", "0.0.0.0", "-m", "8222"},
				ReadinessProbe: httpProbe("/healthz", 1, 3),
				Ports:          []corev1.ContainerPort{{Name: "monitor", ContainerPort: 8222}},
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "sleep 0.2"}}}, PeriodSeconds: 1},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, time.Minute, 200*time.Millisecond, "child pod Ready", func() error {
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), "server", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !kubeutil.PodReady(p) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	fmt.Printf("CHILD-PIDS %s\n", strings.Trim(fmt.Sprint(node.PIDs()), "[]"))
	if mode == "fail" {
		// Fail once the parent has seen the processes alive.
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		t.Fatalf("a deliberately failed assertion")
	}
	time.Sleep(5 * time.Minute) // killed by the parent
}

func TestNoProcessOutlivesTheTest(t *testing.T) {
	env := testenv.Start(t, testenv.Options{SkipCRDs: true})
	for _, mode := range []string{"fail", "kill"} {
		t.Run("child that does "+mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestChildNode$", "-test.v")
			cmd.Env = append(os.Environ(), "LOCALNODE_CHILD_KUBECONFIG="+env.KubeconfigPath, "LOCALNODE_CHILD_MODE="+mode)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			var out, errOut strings.Builder
			cmd.Stderr = &errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			var pids []int
			s := bufio.NewScanner(stdout)
			for s.Scan() {
				line := s.Text()
				out.WriteString(line + "\n")
				if rest, ok := strings.CutPrefix(line, "CHILD-PIDS "); ok {
					for _, f := range strings.Fields(rest) {
						n, _ := strconv.Atoi(f)
						pids = append(pids, n)
					}
					break
				}
			}
			if len(pids) == 0 {
				_ = cmd.Wait()
				t.Fatalf("child printed no pids:\n%s\n%s", out.String(), errOut.String())
			}
			var alive []int
			for _, p := range pids {
				if localnode.ProcessAlive(p) {
					alive = append(alive, p)
				}
			}
			if len(alive) == 0 {
				t.Fatalf("no child process alive to begin with: %v", pids)
			}
			if mode == "kill" {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			} else {
				_, _ = stdin.Write([]byte("fail now\n"))
			}
			go func() { _, _ = bufio.NewReader(stdout).WriteTo(&strings.Builder{}) }()
			err = cmd.Wait()
			t.Logf("child (%s) ended: %v; it had started pids %v, %v of them alive before it ended", mode, err, pids, alive)
			if rest := waitDead(pids, 5*time.Second); len(rest) > 0 {
				t.Errorf("processes outlived the child: %v", rest)
			} else {
				t.Logf("all processes of the child are gone")
			}
		})
	}
}

// describe summarises the container states of a pod for failure messages.
func describe(p *corev1.Pod) string {
	var b strings.Builder
	for _, c := range p.Status.ContainerStatuses {
		switch {
		case c.State.Waiting != nil:
			fmt.Fprintf(&b, "%s waiting %s: %s; ", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
		case c.State.Running != nil:
			fmt.Fprintf(&b, "%s running ready=%v restarts=%d; ", c.Name, c.Ready, c.RestartCount)
		case c.State.Terminated != nil:
			fmt.Fprintf(&b, "%s terminated %d; ", c.Name, c.State.Terminated.ExitCode)
		}
	}
	return b.String()
}
