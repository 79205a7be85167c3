package localnode

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// dnsNode is a Node with listers over the given objects and no API server.
func dnsNode(t *testing.T, objs ...any) *Node {
	t.Helper()
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *corev1.Pod:
			err = pods.Add(o)
		case *corev1.Service:
			err = services.Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &Node{
		pods:     listerscorev1.NewPodLister(pods),
		services: listerscorev1.NewServiceLister(services),
		workers:  map[types.UID]*podWorker{},
	}
}

func testPod(ns, name, ip string, ready bool, labels map[string]string, hostname, subdomain string) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Labels: labels},
		Spec:       corev1.PodSpec{Hostname: hostname, Subdomain: subdomain},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
}

func testService(ns, name string, headless, publishNotReady bool, selector map[string]string) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Selector: selector, PublishNotReadyAddresses: publishNotReady, ClusterIP: "10.96.0.10"},
	}
	if headless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return s
}

func TestDNSViewAnswersAsClusterDNS(t *testing.T) {
	app := map[string]string{"app": "demo"}
	n := dnsNode(t,
		testService("nats", "demo-headless", true, true, app),
		testService("nats", "demo", false, false, app),
		testService("nats", "strict-headless", true, false, app),
		testService("nats", "manual", false, false, nil),
		testPod("nats", "demo-0-0", "127.0.0.2", false, app, "demo-0-0", "demo-headless"),
		testPod("nats", "demo-1-0", "127.0.0.3", true, app, "demo-1-0", "demo-headless"),
		testPod("nats", "demo-2-0", "", false, app, "demo-2-0", "demo-headless"),
		testPod("nats", "loose", "127.0.0.5", true, app, "", ""),
		testPod("nats", "elsewhere", "127.0.0.6", true, app, "elsewhere", "other-subdomain"),
		testPod("other", "demo-0-0", "127.0.0.7", true, app, "demo-0-0", "demo-headless"),
	)
	got := n.dnsView()
	want := dnsView{
		// publishNotReadyAddresses: every pod with an address.
		"demo-headless.nats.svc.cluster.local":          {"127.0.0.2", "127.0.0.3", "127.0.0.6", "127.0.0.5"},
		"demo-0-0.demo-headless.nats.svc.cluster.local": {"127.0.0.2"},
		"demo-1-0.demo-headless.nats.svc.cluster.local": {"127.0.0.3"},
		// A Service with a virtual IP: one ready pod, the first by name.
		"demo.nats.svc.cluster.local": {"127.0.0.3"},
		// Ready pods only; no pod has the subdomain strict-headless.
		"strict-headless.nats.svc.cluster.local": {"127.0.0.3", "127.0.0.6", "127.0.0.5"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dnsView (-want +got):\n%s", diff)
	}

	for _, tt := range []struct{ name, ns, want string }{
		{"demo-1-0.demo-headless.nats.svc.cluster.local", "", "127.0.0.3"},
		{"demo-1-0.demo-headless.nats.svc.cluster.local.", "", "127.0.0.3"},
		{"DEMO-1-0.demo-headless.nats.svc.cluster.local", "", "127.0.0.3"},
		{"demo-1-0.demo-headless.nats.svc", "", "127.0.0.3"},
		{"demo-1-0.demo-headless.nats", "", "127.0.0.3"},
		{"demo-1-0.demo-headless", "nats", "127.0.0.3"},
		{"demo-1-0.demo-headless", "", ""},
		{"demo-1-0.demo-headless", "other", ""},
		{"demo", "nats", "127.0.0.3"},
		{"demo.nats", "other", "127.0.0.3"},
		{"demo-1-0.demo-headless.nats.svc.", "", ""},
		{"demo-2-0.demo-headless.nats.svc.cluster.local", "", ""},
		{"loose.demo-headless.nats.svc.cluster.local", "", ""},
	} {
		var first string
		if a := got.lookup(tt.name, tt.ns); len(a) > 0 {
			first = a[0]
		}
		if first != tt.want {
			t.Errorf("lookup(%q) from namespace %q = %v, want %q", tt.name, tt.ns, got.lookup(tt.name, tt.ns), tt.want)
		}
	}
	if ip, ok := n.Resolve("demo-0-0.demo-headless.nats.svc.cluster.local"); !ok || ip != "127.0.0.2" {
		t.Errorf("Resolve = %q, %v", ip, ok)
	}
	if ip, ok := n.Resolve("demo-9-0.demo-headless.nats.svc.cluster.local"); ok {
		t.Errorf("Resolve of a missing pod = %q, %v", ip, ok)
	}
}

func TestHostsFileListsTheClusterAsThePodsResolverSeesIt(t *testing.T) {
	v := dnsView{
		"demo-headless.nats.svc.cluster.local":           {"127.0.0.2", "127.0.0.3"},
		"demo-0-0.demo-headless.nats.svc.cluster.local":  {"127.0.0.2"},
		"demo-1-0.demo-headless.nats.svc.cluster.local":  {"127.0.0.3"},
		"demo.nats.svc.cluster.local":                    {"127.0.0.3"},
		"demo-0-0.demo-headless.other.svc.cluster.local": {"127.0.1.10"},
	}
	got := string(newHostsFiles(v).file("nats", "127.0.0.2", "demo-0-0", "demo-headless"))
	want := podLocalhost("127.0.0.2") + "127.0.0.2\tdemo-0-0.demo-headless.nats.svc.cluster.local\tdemo-0-0\n" +
		"# Cluster DNS (localnode): pods of headless Services and Services.\n" +
		"127.0.0.2\tdemo-headless.nats.svc.cluster.local demo-0-0.demo-headless.nats.svc demo-0-0.demo-headless.nats demo-0-0.demo-headless demo-headless.nats.svc demo-headless.nats demo-headless\n" +
		"127.0.0.3\tdemo-1-0.demo-headless.nats.svc.cluster.local demo-headless.nats.svc.cluster.local demo-1-0.demo-headless.nats.svc demo-1-0.demo-headless.nats demo.nats.svc.cluster.local demo-1-0.demo-headless demo-headless.nats.svc demo-headless.nats demo-headless demo.nats.svc demo.nats demo\n" +
		"127.0.1.10\tdemo-0-0.demo-headless.other.svc.cluster.local demo-0-0.demo-headless.other.svc demo-0-0.demo-headless.other\n"
	if got != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
	// localhost is the pod's own address, as a pod's loopback is its own;
	// ::1 keeps its other names only.
	if !strings.Contains(got, "\n127.0.0.2\tlocalhost\n") || strings.Contains(got, "127.0.0.1") ||
		!strings.Contains(got, "\n::1\tip6-localhost ip6-loopback\n") || strings.Count(got, "localhost") != 2 {
		t.Errorf("file does not give localhost the pod's address alone:\n%s", got)
	}
	// From another namespace, the short names are that namespace's.
	other := string(newHostsFiles(v).file("other", "127.0.1.10", "demo-0-0", "demo-headless"))
	if !strings.Contains(other, "\n127.0.0.3\tdemo-1-0.demo-headless.nats.svc.cluster.local demo-headless.nats.svc.cluster.local demo-1-0.demo-headless.nats.svc demo-1-0.demo-headless.nats demo.nats.svc.cluster.local demo-headless.nats.svc demo-headless.nats demo.nats.svc demo.nats\n") ||
		strings.Contains(other, " demo-1-0.demo-headless\n") || strings.Contains(other, " demo\n") {
		t.Errorf("file from namespace other:\n%s", other)
	}
	// A pod without a subdomain has only its hostname.
	plain := string(newHostsFiles(v).file("nats", "127.0.0.9", "client", ""))
	if !strings.Contains(plain, "\n127.0.0.9\tclient\n") {
		t.Errorf("file of a pod without subdomain:\n%s", plain)
	}
}

// spec.hostAliases follow the kubelet's lines, 127.0.0.1 as the pod's own
// address (its loopback), and a name an alias gives is answered by the
// alias alone: the cluster DNS lines leave it out.
func TestHostsFileHasTheHostAliases(t *testing.T) {
	v := dnsView{
		"demo.nats.svc.cluster.local":                   {"127.0.0.3"},
		"demo-0-0.demo-headless.nats.svc.cluster.local": {"127.0.0.2"},
	}
	got := string(newHostsFiles(v).file("nats", "127.0.0.2", "demo-0-0", "demo-headless",
		corev1.HostAlias{IP: "127.0.0.1", Hostnames: []string{"demo.nats.svc"}},
		corev1.HostAlias{IP: "10.1.2.3", Hostnames: []string{"a.example.com", "b.example.com"}}))
	if !strings.Contains(got, "\n# Entries added by HostAliases.\n127.0.0.2\tdemo.nats.svc\n10.1.2.3\ta.example.com\tb.example.com\n") {
		t.Errorf("no host alias lines:\n%s", got)
	}
	if strings.Count(got, "demo.nats.svc\n")+strings.Count(got, "demo.nats.svc ") != 1 || !strings.Contains(got, "demo.nats.svc.cluster.local") {
		t.Errorf("demo.nats.svc is not the alias's alone, or the other names went:\n%s", got)
	}
}

// Container paths in the values of the container's own env become the
// local directories behind them; the node's base env is left alone.
func TestEnvPathsMapsMountPaths(t *testing.T) {
	r := &rewriter{mounts: map[string]string{"/etc/nats-monitor-ca": "/tmp/pod/volumes/monitor-ca"}}
	got := envPaths([]string{"PATH=/etc/nats-monitor-ca", "SSL_CERT_FILE=/etc/nats-monitor-ca/ca.crt", "OTHER=/etc/nats-monitor-cab"},
		[]corev1.EnvVar{{Name: "SSL_CERT_FILE"}, {Name: "OTHER"}}, r)
	want := []string{"PATH=/etc/nats-monitor-ca", "SSL_CERT_FILE=/tmp/pod/volumes/monitor-ca/ca.crt", "OTHER=/etc/nats-monitor-cab"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("envPaths (-want +got):\n%s", diff)
	}
}

// The cluster DNS lines are resolved once per namespace and view: a pod's
// file from a shared hostsFiles is the one it gets alone, and one pod's own
// names do not go missing from the next pod's file.
func TestHostsFilesShareTheNamespacesLinesNotThePodsOwnNames(t *testing.T) {
	v := fleetView(3, 2)
	files := newHostsFiles(v)
	for _, p := range []struct{ ns, ip, host string }{
		{"ns-0", "127.0.0.1", "c0-0-0"}, {"ns-0", "127.0.0.2", "c1-0-0"}, {"ns-1", "127.0.0.3", "c0-0-0"}, {"ns-0", "127.0.0.1", "c0-0-0"},
	} {
		shared := string(files.file(p.ns, p.ip, p.host, "c0-headless"))
		alone := string(newHostsFiles(v).file(p.ns, p.ip, p.host, "c0-headless"))
		if shared != alone {
			t.Errorf("%s/%s from the shared view:\n%s\nalone:\n%s", p.ns, p.host, shared, alone)
		}
	}
	first := string(files.file("ns-0", "127.0.0.1", "c0-0-0", "c0-headless"))
	second := string(files.file("ns-0", "127.0.0.2", "c1-0-0", "c1-headless"))
	const fqdn = "c0-0-0.c0-headless.ns-0.svc.cluster.local"
	_, firstLines, _ := strings.Cut(first, "# Cluster DNS")
	_, secondLines, _ := strings.Cut(second, "# Cluster DNS")
	if strings.Contains(firstLines, fqdn) || !strings.Contains(secondLines, "\t"+fqdn+" ") {
		t.Errorf("a pod's own name is listed in its cluster lines, or missing from another pod's:\n%s\n%s", first, second)
	}
	if len(files.lines) != 2 {
		t.Errorf("lines resolved for %d namespaces, want 2", len(files.lines))
	}
}

// fleetView is the cluster DNS of clusters NatsClusters of 1 server in each
// of namespaces namespaces, as hack/bench-scale.sh makes them.
func fleetView(clusters, namespaces int) dnsView {
	v := dnsView{}
	ip := 1
	for n := range namespaces {
		for c := range clusters {
			a := fmt.Sprintf("127.0.%d.%d", ip/250, ip%250+1)
			ip++
			dom := fmt.Sprintf(".ns-%d.svc.cluster.local", n)
			v.add(fmt.Sprintf("c%d-headless", c)+dom, a)
			v.add(fmt.Sprintf("c%d-0-0.c%d-headless", c, c)+dom, a)
			v.add(fmt.Sprintf("c%d", c)+dom, a)
		}
	}
	return v
}

// BenchmarkHostsFilesOfAFleet writes the hosts files of 100 pods (10
// namespaces of 10 one-server clusters) from one view, as the node's DNS
// loop does after each pod change.
func BenchmarkHostsFilesOfAFleet(b *testing.B) {
	v := fleetView(10, 10)
	for b.Loop() {
		files := newHostsFiles(v)
		for n := range 10 {
			for c := range 10 {
				files.file(fmt.Sprintf("ns-%d", n), "127.0.9.9", fmt.Sprintf("c%d-0-0", c), fmt.Sprintf("c%d-headless", c))
			}
		}
	}
}
