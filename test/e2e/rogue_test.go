package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/internal/testport"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// checkRogueServerIsRefused starts a nats-server process the controller
// does not manage, as any pod of the Kubernetes cluster could: a gateway
// named rogue to the cluster's first server's gateway port, and a leaf
// remote to its leaf port (over TLS it does not verify, with no
// credentials), its own clients in an account named like the app account
// of appCreds (gateways route messages by account name). The cluster runs
// with spec.gateway and no gateway TLS setting, so with TLS by default,
// and accepts leaves with spec.auth. The rogue server must get neither
// connection: no server of the cluster lists it as an inbound gateway or
// a leaf, a client of the rogue server receives none of 20 messages a
// client of the cluster publishes (which the cluster's own subscriber
// receives), and the rogue server's log shows it tried both ports and was
// refused, so the check is not passing because it never dialled.
func checkRogueServerIsRefused(ctx context.Context, t *testing.T, s *framework.Stack, ns, cluster, appCreds string) {
	t.Helper()
	pods, err := s.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "cluster.nats-operator.io/cluster=" + cluster})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the pods of %s/%s: %v", ns, cluster, err)
	}
	target := pods.Items[0].Status.PodIP
	account := credsAccount(t, appCreds)
	client, err := testport.Pick("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := testport.Pick("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := fmt.Sprintf(`server_name: rogue-0
listen: "127.0.0.1:%d"
accounts { %s: { users: [{user: rogue, password: rogue}] } }
gateway {
  name: rogue
  listen: "127.0.0.1:%d"
  gateways: [{name: %s, urls: ["nats://%s:7222"]}]
}
leafnodes {
  remotes: [{urls: ["tls://%s:7422"], tls: {insecure: true}}]
}
`, client, account, gw, cluster, target, target)
	confPath, logPath := filepath.Join(dir, "rogue.conf"), filepath.Join(dir, "rogue.log")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(testenv.NatsServerBinary(t, "2.15.2"), "-c", confPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	rogue := framework.Connect(t, []string{fmt.Sprintf("nats://127.0.0.1:%d", client)}, nats.UserInfo("rogue", "rogue"))
	stolen, err := rogue.SubscribeSync("rogue.probe.>")
	if err != nil {
		t.Fatal(err)
	}
	_ = rogue.Flush()
	own := framework.Connect(t, s.PodURLs(ctx, t, ns, cluster), nats.UserCredentials(appCreds))
	seen, err := own.SubscribeSync("rogue.probe.>")
	if err != nil {
		t.Fatal(err)
	}
	_ = own.Flush()

	// The rogue server redials every second or so: give it time to try
	// both ports more than once before and while the cluster publishes.
	poll.Eventually(t, time.Minute, time.Second, "the rogue server's log to show its gateway and leaf dials refused", func() error {
		log, _ := os.ReadFile(logPath)
		for _, port := range []string{target + ":7222", target + ":7422"} {
			if !refusedDial(string(log), port) {
				return fmt.Errorf("no refused dial of %s in the rogue server's log yet (%d bytes; last: %q)", port, len(log), tail(string(log), 6))
			}
		}
		return nil
	})
	for i := range 20 {
		if err := own.Publish(fmt.Sprintf("rogue.probe.%d", i), []byte("secret")); err != nil {
			t.Fatal(err)
		}
	}
	_ = own.Flush()
	for i := range 20 {
		if _, err := seen.NextMsg(10 * time.Second); err != nil {
			t.Fatalf("the cluster's own subscriber got %d of 20 messages: %v", i, err)
		}
	}
	got := 0
	for {
		if _, err := stolen.NextMsg(3 * time.Second); err != nil {
			break
		}
		got++
	}
	t.Logf("a client of the rogue server received %d of 20 messages published by the cluster's clients (its own subscriber got 20)", got)
	if got != 0 {
		t.Errorf("the rogue server's client received %d of the cluster's 20 messages", got)
	}
	for _, p := range pods.Items {
		for _, ep := range []string{"gatewayz", "leafz"} {
			_, body, err := framework.Get(fmt.Sprintf("http://%s:8222/%s", p.Status.PodIP, ep))
			if err != nil {
				t.Fatalf("%s /%s: %v", p.Name, ep, err)
			}
			if strings.Contains(body, "rogue") {
				t.Errorf("%s /%s names the rogue server:\n%s", p.Name, ep, body)
			}
		}
	}
	log, _ := os.ReadFile(logPath)
	t.Logf("the rogue server's dials, refused:\n%s", grepLines(string(log), target))
}

// mustCluster reads a NatsCluster or fails the test.
func mustCluster(ctx context.Context, t *testing.T, s *framework.Stack, ns, name string) *clusterv1beta1.NatsCluster {
	t.Helper()
	nc, err := s.Cluster(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// refusedDial: the log shows a connection to addr refused or closed by
// the other side (nats-server 2.15.2 logs the leaf's "[ERR] ... Leafnode
// Error 'Authorization Violation'" and the gateway's "Gateway connection
// closed" once the cluster's server drops the plain-text handshake).
func refusedDial(log, addr string) bool {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, addr) && (strings.Contains(l, "[ERR]") || strings.Contains(l, "connection closed")) {
			return true
		}
	}
	return false
}

func grepLines(log, s string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return tail(strings.Join(out, "\n"), 8)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// credsAccount is the public key of the account a creds file's user is in.
func credsAccount(t *testing.T, credsPath string) string {
	t.Helper()
	data, err := os.ReadFile(credsPath)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.ParseDecoratedJWT(data)
	if err != nil {
		t.Fatal(err)
	}
	uc, err := jwt.DecodeUserClaims(token)
	if err != nil {
		t.Fatal(err)
	}
	if uc.IssuerAccount != "" {
		return uc.IssuerAccount
	}
	return uc.Issuer
}
