package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/localnode"
)

var serverPods = []string{"demo-0-0", "demo-1-0", "demo-2-0"}

// On the example cluster without auth, under a publisher on an R3 stream,
// other server tags are applied by a config reload of each server: no pod
// restarts, every server reports its new revision and runs the tags,
// appliedBy Reload. Then tags and another version together restart the
// servers one at a time, and restartReason names the version, the part no
// reload applies. No acknowledged message is lost.
func TestConfigChangesReloadWithoutRestarts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsReload)
	_, _, pub := startLoadedCluster(ctx, t, s, "2.15.1")
	if _, err := s.Kube.CoreV1().Secrets(s.NS).Get(ctx, "demo-system-user", metav1.GetOptions{}); err != nil {
		t.Fatalf("the controller's system user Secret: %v", err)
	}
	before := s.PodUIDs(ctx, s.NS, serverPods...)

	applied := time.Now()
	patchCluster(ctx, t, s, `{"spec":{"serverTags":{"az":"a"}}}`)
	reloading, final := waitUpToDateRecording(ctx, t, s, clusterv1beta1.ReasonReloading)
	t.Logf("from the patch to UpToDate by reload: %s; Progressing while it ran: %v", time.Since(applied).Round(time.Millisecond), reloading)
	if len(reloading) == 0 {
		t.Errorf("Progressing never read %s", clusterv1beta1.ReasonReloading)
	}
	if c := final.Status.Config; c == nil || c.AppliedBy != clusterv1beta1.AppliedByReload || c.RestartReason != "" {
		t.Errorf("status.config = %+v, want appliedBy Reload and no restartReason", c)
	}
	after := s.PodUIDs(ctx, s.NS, serverPods...)
	for _, p := range serverPods {
		if before[p] == "" || after[p] != before[p] {
			t.Errorf("pod %s had UID %q before the reload and %q after: it restarted", p, before[p], after[p])
		}
	}
	checkServersRunTheirRevision(ctx, t, s, final, "az:a")
	// Events are sent asynchronously.
	poll.Eventually(t, 30*time.Second, 250*time.Millisecond, "a ServerReloaded Event per server", func() error {
		ev, err := s.Events(ctx, s.NS, "demo", clusterv1beta1.EventServerReloaded)
		if err != nil {
			return err
		}
		if len(ev) != 3 {
			all, _ := s.Kube.CoreV1().Events(s.NS).List(ctx, metav1.ListOptions{})
			var got []string
			for _, e := range all.Items {
				got = append(got, e.InvolvedObject.Name+" "+e.Reason+": "+e.Message)
			}
			for _, n := range []string{"demo-0", "demo-1", "demo-2"} {
				sts, _ := s.Kube.AppsV1().StatefulSets(s.NS).Get(ctx, n, metav1.GetOptions{})
				got = append(got, n+" reload annotation "+sts.Annotations[clusterv1beta1.AnnotationReload])
			}
			return fmt.Errorf("%d %s Events; every Event: %v", len(ev), clusterv1beta1.EventServerReloaded, got)
		}
		return nil
	})

	applied = time.Now()
	patchCluster(ctx, t, s, `{"spec":{"version":"2.15.2","serverTags":{"az":"b"}}}`)
	restarting, final := waitUpToDateRecording(ctx, t, s, clusterv1beta1.ReasonRollingRestart)
	t.Logf("from the patch to UpToDate by restarts: %s; Progressing while it ran: %v", time.Since(applied).Round(time.Millisecond), restarting)
	const why = "another nats-server version (2.15.1 -> 2.15.2) cannot be reloaded"
	if c := final.Status.Config; c == nil || c.AppliedBy != clusterv1beta1.AppliedByRestart || c.RestartReason != why {
		t.Errorf("status.config = %+v, want appliedBy Restart and restartReason %q", c, why)
	}
	restarted := s.PodUIDs(ctx, s.NS, serverPods...)
	for _, p := range serverPods {
		if restarted[p] == after[p] {
			t.Errorf("pod %s kept UID %s: it was not restarted", p, after[p])
		}
	}
	checkServersRunTheirRevision(ctx, t, s, final, "az:b")
	verifyNoLoss(ctx, t, s, pub)
}

// When a reloaded server does not report its new revision within
// --reload-timeout (here a node that updates mounted ConfigMaps only every
// 10 minutes, a kubelet far slower than the 5 s timeout), the reload
// becomes a restart of that server, with the reason in
// status.rollout.restartReason. (With 30 s, the servers staged by the
// first reload could all be confirmed by one refresh that fell in the
// first server's window, and nothing would restart.)
func TestUnconfirmedReloadBecomesARestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.StartStackWithNode(ctx, t, localnode.Options{SyncPeriod: 10 * time.Minute}, "--reload-timeout=5s")
	settledCluster(ctx, t, s, "")
	before := s.PodUIDs(ctx, s.NS, serverPods...)
	patchCluster(ctx, t, s, `{"spec":{"serverTags":{"az":"a"}}}`)

	var why string
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, "a restart reason naming the unconfirmed reload", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if r := nc.Status.Rollout; r != nil && strings.Contains(r.RestartReason, "did not report revision") {
			why = r.RestartReason
			return nil
		}
		return fmt.Errorf("status.rollout %+v; %s", nc.Status.Rollout, framework.Conditions(nc))
	})
	t.Logf("status.rollout.restartReason: %s", why)
	// No file is refreshed within any server's window; the first reloaded
	// is the highest ordinal that is not the JetStream meta leader (which
	// steps last), so the reason names whichever server that is.
	server, rest, ok := strings.Cut(why, " did not report revision ")
	if !ok || !slices.Contains([]string{"demo-0", "demo-1", "demo-2"}, server) || !strings.HasSuffix(rest, " within 5s of its reload") {
		t.Fatalf("restartReason %q, want a server of demo named with the 5s timeout", why)
	}
	pod := server + "-0"
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, pod+" restarted", func() error {
		if uid := s.PodUIDs(ctx, s.NS, pod)[pod]; uid == "" || uid == before[pod] {
			return fmt.Errorf("%s has UID %q", pod, uid)
		}
		return nil
	})
}

// waitUpToDateRecording waits for the cluster to be Settled and UpToDate
// after a patch, recording each distinct Progressing message with reason
// seen on the way.
func waitUpToDateRecording(ctx context.Context, t *testing.T, s *framework.Stack, reason string) ([]string, *clusterv1beta1.NatsCluster) {
	t.Helper()
	var seen []string
	var final *clusterv1beta1.NatsCluster
	moved := false
	poll.Eventually(t, 8*time.Minute, 100*time.Millisecond, "Settled and UpToDate after the patch", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		c := conditionOf(nc, clusterv1beta1.ConditionProgressing)
		if c.Reason == reason && !slices.Contains(seen, c.Message) {
			seen = append(seen, c.Message)
		}
		moved = moved || c.Status == metav1.ConditionTrue
		if !moved || c.ObservedGeneration != nc.Generation {
			return fmt.Errorf("not moving yet: %s", framework.Conditions(nc))
		}
		if err := framework.CheckSettledUpToDate(nc); err != nil {
			return err
		}
		final = nc
		return nil
	})
	return seen, final
}

// checkServersRunTheirRevision checks every server reports the revision its
// ConfigMap holds and runs the tag (/varz tags).
func checkServersRunTheirRevision(ctx context.Context, t *testing.T, s *framework.Stack, nc *clusterv1beta1.NatsCluster, tag string) {
	t.Helper()
	revs := s.ServerRevisions(ctx, t, nc)
	for _, srv := range nc.Status.Servers {
		if srv.ConfigRevision != revs[srv.Name] {
			t.Errorf("%s reports revision %q, its ConfigMap holds %q", srv.Name, srv.ConfigRevision, revs[srv.Name])
		}
		pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, srv.Name+"-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, body, err := framework.Get(fmt.Sprintf("http://%s:8222/varz", pod.Status.PodIP))
		var v struct {
			Tags []string `json:"tags"`
		}
		if err == nil {
			err = json.Unmarshal([]byte(body), &v)
		}
		if err != nil || !slices.Contains(v.Tags, tag) {
			t.Errorf("%s /varz tags %v (%v), want %s", srv.Name, v.Tags, err, tag)
		}
	}
}

// A reload nats-server refuses becomes a restart of that server, with
// nats-server's words in status.rollout.restartReason and a ReloadRefused
// Event. The refusal is constructed: just before a reloadable change (other
// server tags), the config file mounted into the first server to reload is
// edited to another server_name, which nats-server refuses to reload
// ("config reload not supported for ServerName"). The node updates mounted
// ConfigMaps every 30 s, so the edit is what the server reloads.
func TestRefusedReloadBecomesARestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := framework.StartStackWithNode(ctx, t, localnode.Options{SyncPeriod: 30 * time.Second})
	nc := settledCluster(ctx, t, s, "")
	first := expectedOrder(nc.Status.JetStream.MetaLeader)[0]
	pod := first + "-0"
	before := s.PodUIDs(ctx, s.NS, pod)

	dir := s.Node.VolumePath(s.NS, pod, render.ConfigVolumeName)
	if dir == "" {
		t.Fatalf("the node runs no pod %s", pod)
	}
	path := filepath.Join(dir, render.ConfigKey)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(raw, &conf); err != nil {
		t.Fatalf("the mounted config of %s: %v", pod, err)
	}
	conf["server_name"] = "renamed-behind-the-controller"
	edited, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	// The mounted file is a symlink into the volume's data directory, as a
	// kubelet makes it; write the file it points to.
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	patchCluster(ctx, t, s, `{"spec":{"serverTags":{"az":"a"}}}`)

	var why string
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, "a restart reason with nats-server's refusal", func() error {
		got, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if r := got.Status.Rollout; r != nil && strings.HasPrefix(r.RestartReason, "nats-server refused to reload") {
			why = r.RestartReason
			return nil
		}
		return fmt.Errorf("status.rollout %+v; %s", got.Status.Rollout, framework.Conditions(got))
	})
	t.Logf("status.rollout.restartReason: %s", why)
	if want := "nats-server refused to reload " + first + ": config reload not supported for ServerName"; !strings.HasPrefix(why, want) {
		t.Errorf("restartReason %q, want it to start with %q", why, want)
	}
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, first+" restarted", func() error {
		if uid := s.PodUIDs(ctx, s.NS, pod)[pod]; uid == "" || uid == before[pod] {
			return fmt.Errorf("%s has UID %q", pod, uid)
		}
		return nil
	})
	poll.Eventually(t, 30*time.Second, 250*time.Millisecond, "a ReloadRefused Event", func() error {
		ev, err := s.Events(ctx, s.NS, "demo", clusterv1beta1.EventReloadRefused)
		if err != nil || len(ev) == 0 {
			return fmt.Errorf("%d Events (%v)", len(ev), err)
		}
		t.Logf("Event %s: %s", ev[0].Reason, ev[0].Message)
		return nil
	})
}
