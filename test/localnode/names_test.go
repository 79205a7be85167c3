package localnode_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// Three nats-server pods whose routes name each other only by DNS name (in
// the three forms a pod can use) form a cluster: each pod's process
// resolves the others' stable names through its own /etc/hosts, which
// follows pods as they go, while the machine's /etc/hosts and mounts stay
// as they were. A test client dials a server by its DNS name and checks
// its certificate for that name.
func TestPodsResolveEachOthersStableNamesThroughTheirOwnHostsFile(t *testing.T) {
	hostsBefore, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	mountsBefore, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t, testenv.Options{ControllerManager: true, SkipCRDs: true})
	node := startNode(t, env, "localnode")
	client := kubernetes.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	ns := "names"
	createNamespace(t, client, ns)

	fqdn := func(i int) string { return fmt.Sprintf("dns-%d.web.%s.svc.cluster.local", i, ns) }
	caPEM, certPEM, keyPEM := testCertificate(t, fqdn(0), fmt.Sprintf("dns-0.web.%s.svc", ns))
	if _, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "dns-0-tls"},
		Data:       map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{"app": "dns"},
			Ports:                    []corev1.ServicePort{{Name: "cluster", Port: 6222}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One route in each form: fully qualified, without .cluster.local, and
	// relative to the pod's namespace through its search path.
	routes := strings.Join([]string{
		"nats://" + fqdn(0) + ":6222",
		fmt.Sprintf("nats://dns-1.web.%s.svc:6222", ns),
		"nats://dns-2.web:6222",
	}, ",")
	var pods []*corev1.Pod
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("dns-%d", i)
		args := []string{"--name", name, "-a", "0.0.0.0", "-p", "4222", "-m", "8222", "-D",
			"--cluster_name", "names", "--cluster", "nats://0.0.0.0:6222", "--routes", routes}
		var mounts []corev1.VolumeMount
		var volumes []corev1.Volume
		if i == 0 {
			args = append(args, "--tls", "--tlscert", "/etc/tls/tls.crt", "--tlskey", "/etc/tls/tls.key")
			mounts = []corev1.VolumeMount{{Name: "tls", MountPath: "/etc/tls"}}
			volumes = []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "dns-0-tls"}}}}
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "dns"}},
			Spec: corev1.PodSpec{
				Hostname:                      name,
				Subdomain:                     "web",
				TerminationGracePeriodSeconds: ptr.To[int64](2),
				Containers: []corev1.Container{{
					Name: "nats", Image: natsImage, Args: args, VolumeMounts: mounts,
					Ports:          []corev1.ContainerPort{{Name: "monitor", ContainerPort: 8222}},
					ReadinessProbe: httpProbe("/healthz", 1, 3),
				}},
				Volumes: volumes,
			},
		}
		pods = append(pods, pod)
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ip := func(i int) string { return node.PodAddress(ns, fmt.Sprintf("dns-%d", i)) }

	took := poll.Eventually(t, 90*time.Second, 200*time.Millisecond, "every server routed to both others", func() error {
		for i := 0; i < 3; i++ {
			peers, err := routePeers(ip(i))
			if err != nil {
				return fmt.Errorf("dns-%d: %w", i, err)
			}
			want := []string{}
			for j := 0; j < 3; j++ {
				if j != i {
					want = append(want, fmt.Sprintf("dns-%d", j))
				}
			}
			if strings.Join(peers, ",") != strings.Join(want, ",") {
				return fmt.Errorf("dns-%d has routes to %v", i, peers)
			}
		}
		return nil
	})
	t.Logf("three servers whose routes name each other by DNS name only are fully routed %s after creation", took.Round(time.Millisecond))

	// nats-server logged each name with the address it resolved to. Each
	// form of name is resolved by at least one of the other two servers: a
	// server whose peer's route arrived first stops soliciting its own
	// route there, and may never log the attempt (seen on a loaded
	// machine: dns-2 started last and connected to both before either
	// tried dns-2.web again).
	logs := make([]string, 3)
	for i := range logs {
		b, err := os.ReadFile(node.LogPath(ns, fmt.Sprintf("dns-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = string(b)
	}
	for j, host := range []string{fqdn(0), fmt.Sprintf("dns-1.web.%s.svc", ns), "dns-2.web"} {
		line := fmt.Sprintf("Trying to connect to route on %s:6222 (%s:6222)", host, ip(j))
		var by []string
		for i := range logs {
			if i != j && strings.Contains(logs[i], line) {
				by = append(by, fmt.Sprintf("dns-%d", i))
			}
		}
		if len(by) == 0 {
			t.Errorf("no other server's log has %q", line)
		} else {
			t.Logf("logged by %v: %s", by, line)
		}
	}

	// What the server process reads as /etc/hosts and /etc/resolv.conf.
	pid := node.ContainerPID(ns, "dns-0", "nats")
	seen := func(file string) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/root%s", pid, file))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	hosts := seen("/etc/hosts")
	if !strings.Contains(hosts, "\n"+ip(0)+"\tlocalhost\n") || !strings.Contains(hosts, "\n"+ip(0)+"\t"+fqdn(0)+"\tdns-0\n") {
		t.Errorf("the /etc/hosts of dns-0 lacks the kubelet's lines:\n%s", hosts)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(hosts, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == ip(2) {
			for _, n := range f[1:] {
				names[n] = true
			}
		}
	}
	for _, want := range []string{fqdn(2), "dns-2.web." + ns + ".svc", "dns-2.web." + ns, "dns-2.web", "web." + ns + ".svc.cluster.local", "web"} {
		if !names[want] {
			t.Errorf("the /etc/hosts of dns-0 does not give %s the address %s of dns-2:\n%s", want, ip(2), hosts)
		}
	}
	if resolv := seen("/etc/resolv.conf"); !strings.Contains(resolv, "nameserver 127.") {
		t.Errorf("the /etc/resolv.conf of dns-0:\n%s", resolv)
	}
	t.Logf("/etc/hosts of dns-0:\n%s", hosts)

	// A client outside the pods dials the server by its name and checks
	// its certificate for that name.
	if got, ok := node.Resolve(fqdn(0)); !ok || got != ip(0) {
		t.Errorf("Resolve(%s) = %q, %v; want %s", fqdn(0), got, ok, ip(0))
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	nc, err := nats.Connect("tls://"+fqdn(0)+":4222", nats.SetCustomDialer(node), nats.SkipHostLookup(), nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("connecting to %s with its certificate checked: %v", fqdn(0), err)
	}
	t.Logf("connected to %s (%s) over TLS, certificate verified for the name", nc.ConnectedUrlRedacted(), nc.ConnectedAddr())
	nc.Close()
	// The check is real: the same server fails it for another name.
	for _, name := range []string{fqdn(0), fqdn(1)} {
		err := natsTLSHandshake(ctx, node, fqdn(0), name, pool)
		var wrong x509.HostnameError
		switch {
		case name == fqdn(0) && err != nil:
			t.Errorf("TLS handshake with %s for its own name: %v", fqdn(0), err)
		case name != fqdn(0) && !errors.As(err, &wrong):
			t.Errorf("TLS handshake with %s checked for %s: %v, want a hostname error", fqdn(0), name, err)
		case name != fqdn(0):
			t.Logf("the certificate of dns-0 checked for %s fails: %v", name, err)
		}
	}

	// A pod that goes is gone from the others' /etc/hosts and from Resolve,
	// and back when a pod of its name is; the running servers resolve it
	// again (the Go resolver re-reads /etc/hosts at most every 5 s).
	if err := client.CoreV1().Pods(ns).Delete(ctx, "dns-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	took = poll.Eventually(t, 30*time.Second, 100*time.Millisecond, "dns-2 gone from the names", func() error {
		if _, err := client.CoreV1().Pods(ns).Get(ctx, "dns-2", metav1.GetOptions{}); err == nil {
			return fmt.Errorf("pod still there")
		}
		if strings.Contains(seen("/etc/hosts"), "dns-2") {
			return fmt.Errorf("still in the /etc/hosts of dns-0")
		}
		if a, ok := node.Resolve(fqdn(2)); ok {
			return fmt.Errorf("still resolves to %s", a)
		}
		return nil
	})
	t.Logf("deleted pod dns-2 left the /etc/hosts of dns-0 and Resolve %s after the delete", took.Round(time.Millisecond))
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pods[2], metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	took = poll.Eventually(t, 60*time.Second, 100*time.Millisecond, "dns-2 back in the names and routed", func() error {
		if a, ok := node.Resolve(fqdn(2)); !ok || a != ip(2) {
			return fmt.Errorf("resolves to %q, %v", a, ok)
		}
		if !strings.Contains(seen("/etc/hosts"), fqdn(2)) {
			return fmt.Errorf("not in the /etc/hosts of dns-0")
		}
		for _, i := range []int{0, 2} {
			peers, err := routePeers(ip(i))
			if err != nil {
				return fmt.Errorf("dns-%d: %w", i, err)
			}
			if len(peers) != 2 {
				return fmt.Errorf("dns-%d has routes to %v", i, peers)
			}
		}
		return nil
	})
	t.Logf("recreated pod dns-2 is back in the names and routed both ways %s after its creation", took.Round(time.Millisecond))

	hostsAfter, err := os.ReadFile("/etc/hosts")
	if err != nil || string(hostsAfter) != string(hostsBefore) {
		t.Errorf("the machine's /etc/hosts changed: %q -> %q (%v)", hostsBefore, hostsAfter, err)
	}
	mountsAfter, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil || string(mountsAfter) != string(mountsBefore) {
		t.Errorf("the test's mounts changed:\n%s\n->\n%s", mountsBefore, mountsAfter)
	}
}

// natsTLSHandshake dials the NATS server at host through node, reads its
// INFO and does the TLS handshake checking the certificate for serverName.
func natsTLSHandshake(ctx context.Context, node *localnode.Node, host, serverName string, roots *x509.CertPool) error {
	conn, err := node.DialContext(ctx, "tcp", host+":4222")
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	info, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.HasPrefix(info, "INFO ") {
		return fmt.Errorf("reading INFO: %q, %v", info, err)
	}
	tc := tls.Client(conn, &tls.Config{ServerName: serverName, RootCAs: roots, MinVersion: tls.VersionTLS12})
	return tc.HandshakeContext(ctx)
}

// routePeers returns the sorted server names the server at ip has routes to.
func routePeers(ip string) ([]string, error) {
	resp, err := http.Get("http://" + ip + ":8222/routez")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Routes []struct {
			RemoteName string `json:"remote_name"`
		} `json:"routes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, rt := range r.Routes {
		set[rt.RemoteName] = true
	}
	var names []string
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// testCertificate returns a CA and a server certificate and key for names,
// in PEM.
func testCertificate(t *testing.T, names ...string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localnode test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
