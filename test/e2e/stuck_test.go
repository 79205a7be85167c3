package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/localnode"
)

// crashingVersion is a version whose "image" starts the real nats-server
// 2.15.2 with a store directory flag on top of the rendered config, which
// the server refuses at start ("Duplicate 'store_dir' configuration"),
// logging why and exiting 1.
const crashingVersion = "2.15.98"

// crashingServer writes that image's entry point.
func crashingServer(t *testing.T) func(string) (string, error) {
	real, err := localnode.TestbinBinary("2.15.2")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "nats-server-"+crashingVersion)
	body := fmt.Sprintf("#!/bin/sh\n# Every flag of the pod, then a second store directory.\nexec %s \"$@\" --jetstream --store_dir /dev/null/jetstream\n", real)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return func(version string) (string, error) {
		if version == crashingVersion {
			return script, nil
		}
		return localnode.TestbinBinary(version)
	}
}

// A version that cannot start (no such image), then reverted, and one that
// starts and crashes, then reverted: each is named in the status with why,
// and after the revert the stuck server is restarted though the cluster is
// not Settled (the rest is), with no annotation; no other server restarts
// and no acknowledged message is lost.
func TestStuckServerIsNamedAndARevertRecoversIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.StartStackWithNode(ctx, t, localnode.Options{BinaryForVersion: crashingServer(t)})
	nc, _, pub := startLoadedCluster(ctx, t, s, "2.15.2")
	leader := nc.Status.JetStream.MetaLeader
	first := expectedOrder(leader)[0]
	var others []string
	for _, n := range servers {
		if n != first {
			others = append(others, n+"-0")
		}
	}

	for _, tc := range []struct {
		version, reason string
		contains        []string
	}{
		{"2.15.99", "ErrImagePull", []string{"ErrImagePull", "2.15.99"}},
		{crashingVersion, "CrashLoopBackOff", []string{"CrashLoopBackOff: exit code 1", "Duplicate 'store_dir' configuration"}},
	} {
		i := slices.Index([]string{"2.15.99", crashingVersion}, tc.version)
		uids := s.PodUIDs(ctx, s.NS, others...)
		patched := time.Now()
		patchCluster(ctx, t, s, fmt.Sprintf(`{"spec":{"version":%q}}`, tc.version))
		var stuck *clusterv1beta1.NatsCluster
		poll.Eventually(t, 30*time.Second, 250*time.Millisecond, first+" named with "+tc.reason, func() error {
			c, err := s.Cluster(ctx, s.NS, "demo")
			if err != nil {
				return err
			}
			stuck = c
			msg := conditionOf(c, clusterv1beta1.ConditionProgressing).Message
			for _, srv := range c.Status.Servers {
				if srv.Name == first && strings.HasPrefix(srv.StartProblem, tc.reason) &&
					strings.Contains(msg, first+" cannot start "+tc.version+": "+tc.reason) {
					return nil
				}
			}
			return errors.New(framework.Conditions(c))
		})
		msg := conditionOf(stuck, clusterv1beta1.ConditionProgressing).Message
		t.Logf("%s after %s: Progressing: %s", tc.version, time.Since(patched).Round(time.Millisecond), msg)
		for _, srv := range stuck.Status.Servers {
			if srv.Name == first {
				t.Logf("status.servers[%s].startProblem: %s", first, srv.StartProblem)
				for _, want := range tc.contains {
					if !strings.Contains(srv.StartProblem+" "+msg, want) {
						t.Errorf("neither the start problem nor the message says %q", want)
					}
				}
			}
		}
		if !strings.Contains(msg, "revert spec.version") {
			t.Errorf("the message does not name the way out: %s", msg)
		}
		poll.Eventually(t, 10*time.Second, 250*time.Millisecond, "a ServerCannotStart Event", func() error {
			events, err := s.Events(ctx, s.NS, "demo", clusterv1beta1.EventServerCannotStart)
			if err != nil {
				return err
			}
			for _, e := range events {
				if strings.Contains(e.Message, tc.reason) && strings.Contains(e.Message, first) {
					return nil
				}
			}
			return fmt.Errorf("%d events", len(events))
		})

		reverted := time.Now()
		patchCluster(ctx, t, s, `{"spec":{"version":"2.15.2"}}`)
		var restartMsg string
		poll.Eventually(t, 60*time.Second, 250*time.Millisecond, "Ready, Settled and UpToDate on 2.15.2 after the revert", func() error {
			c, err := s.Cluster(ctx, s.NS, "demo")
			if err != nil {
				return err
			}
			if m := conditionOf(c, clusterv1beta1.ConditionProgressing).Message; strings.Contains(m, "(1 of 1)") && !strings.Contains(restartMsg, "which is down") {
				restartMsg = m
			}
			if err := framework.CheckSettledUpToDate(c); err != nil {
				return err
			}
			if c.Status.Version != "2.15.2" {
				return errors.New("status.version " + c.Status.Version)
			}
			return nil
		})
		t.Logf("reverted: Ready, Settled and UpToDate on 2.15.2 after %s, no annotation", time.Since(reverted).Round(time.Millisecond))
		if restartMsg != "" {
			t.Logf("Progressing seen after the revert: %s", restartMsg)
		}
		events, err := s.Events(ctx, s.NS, "demo", clusterv1beta1.EventServerRestarted)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range events {
			if strings.Contains(e.Message, tc.reason) && strings.Contains(e.Message, "restarting "+first+" (1 of 1), which is down") {
				found = true
				if i == 0 {
					t.Logf("Event %s: %s", e.Reason, e.Message)
				}
			}
		}
		if !found {
			t.Errorf("no ServerRestarted Event for the revert's step through the closed gate, counted 1 of 1")
		}
		if now := s.PodUIDs(ctx, s.NS, others...); fmt.Sprint(now) != fmt.Sprint(uids) {
			t.Errorf("other servers were restarted: %v -> %v", uids, now)
		}
	}
	verifyNoLoss(ctx, t, s, pub)
}
