package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/test/framework"
)

// secretGet matches the controller's request log (-v=6) of a read of one
// Secret by name: `GET https://.../api/v1/namespaces/<ns>/secrets/<name> 200 OK`.
var secretGet = regexp.MustCompile(`^I(\d{4} \d\d:\d\d:\d\d\.\d{6}).*verb="GET" url="[^"]*/api/v1/namespaces/([^/]+)/secrets/([^"?/]+)"|^I(\d{4} \d\d:\d\d:\d\d\.\d{6}).* GET [^ ]*/api/v1/namespaces/([^/]+)/secrets/([^ ?/]+) `)

// secretReads are the Secrets the controller read by name, with when.
func secretReads(t *testing.T, s *framework.Stack) map[string][]time.Time {
	t.Helper()
	b, err := os.ReadFile(s.Controller.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string][]time.Time{}
	year := time.Now().Year()
	for _, line := range strings.Split(string(b), "\n") {
		m := secretGet.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		stamp, ns, name := m[1], m[2], m[3]
		if stamp == "" {
			stamp, ns, name = m[4], m[5], m[6]
		}
		at, err := time.ParseInLocation("2006 0102 15:04:05.000000", fmt.Sprintf("%d %s", year, stamp), time.Local)
		if err != nil {
			t.Fatal(err)
		}
		reads[ns+"/"+name] = append(reads[ns+"/"+name], at)
	}
	return reads
}

// The controller reads the Secrets a NatsCluster names and its own, by
// name, and no other: its request log (-v=6) shows no read of a Secret
// nobody named, in the cluster's namespace or another. A change of a named
// Secret re-queues the cluster: the controller reads the new values within
// a second.
func TestOnlyTheSecretsAClusterNamesAreRead(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.StartStack(ctx, t, "-v=6")
	s.CreateNamespace(ctx, t, s.NS)
	s.CreateNamespace(ctx, t, "elsewhere")
	for _, ns := range []string{"nats", "elsewhere"} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: ns}, Data: map[string][]byte{"password": []byte("hunter2")}}
		if _, err := s.Kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ca := clientTLSSecret(ctx, t, s)
	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", withClientTLS)
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)

	changed := time.Now()
	writeClientCert(ctx, t, s, ca, true)
	var readAt time.Time
	poll.Eventually(t, 30*time.Second, 100*time.Millisecond, "the changed Secret read again", func() error {
		for _, at := range secretReads(t, s)["nats/demo-client-tls"] {
			if at.After(changed) {
				readAt = at
				return nil
			}
		}
		return fmt.Errorf("no read of nats/demo-client-tls after %s", changed.Format(time.StampMicro))
	})
	t.Logf("demo-client-tls changed at %s, read again %s later", changed.Format(time.StampMicro), readAt.Sub(changed).Round(time.Millisecond))
	if d := readAt.Sub(changed); d > time.Second {
		t.Errorf("the changed Secret was read %s after the change, want within a second", d)
	}

	reads := secretReads(t, s)
	named := map[string]bool{"nats/demo-client-tls": true, "nats/demo-system-user": true, "nats/demo-routes-ca": true, "nats/demo-routes-tls": true}
	for name, at := range reads {
		if !named[name] {
			t.Errorf("the controller read Secret %s (%d times), which no NatsCluster names", name, len(at))
		}
	}
	if len(reads["nats/demo-client-tls"]) == 0 {
		t.Errorf("no read of the named Secret at all: the log pattern matches nothing (reads %v)", reads)
	}
	t.Logf("Secrets read by name: %d distinct, %v", len(reads), func() map[string]int {
		n := map[string]int{}
		for k, v := range reads {
			n[k] = len(v)
		}
		return n
	}())
}
