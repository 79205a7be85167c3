package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/test/framework"
)

// storageClass creates a StorageClass the local node provisions and, when
// expands, grows in place (test/localnode/resize.go).
func storageClass(ctx context.Context, t *testing.T, s *framework.Stack, name string, expands bool) {
	t.Helper()
	sc := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: name},
		Provisioner:          "localnode.nats-operator.io/hostpath",
		AllowVolumeExpansion: &expands,
	}
	if _, err := s.Kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating StorageClass %s: %v", name, err)
	}
}

// withClass puts the example's claims on a StorageClass.
func withClass(class string) func(*unstructured.Unstructured) {
	return func(o *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(o.Object, class, "spec", "jetstream", "volumeClaimTemplate", "spec", "storageClassName")
	}
}

const storagePatch = `{"spec":{"jetstream":{"volumeClaimTemplate":{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}}}}`

// claims returns each server's claim UID and reported capacity.
func claims(ctx context.Context, t *testing.T, s *framework.Stack) (uids, capacity map[string]string) {
	t.Helper()
	uids, capacity = map[string]string{}, map[string]string{}
	for _, srv := range servers {
		c, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, "data-"+srv+"-0", metav1.GetOptions{})
		if err != nil {
			continue
		}
		q := c.Status.Capacity[corev1.ResourceStorage]
		uids[srv], capacity[srv] = string(c.UID), q.String()
	}
	return uids, capacity
}

// maxStorage is what each server's /jsz reports as config.max_storage: the
// limit its JetStream runs with now. Not /varz: in a CI run one server's
// /varz jetstream.config.max_storage read 0 before and after the reload
// while the other two followed it (nats-server 2.15.2 fills /varz's
// jetstream.config when it builds /varz at the first /varz request; that
// server's first /varz, polled by the controller from the start, came
// before its JetStream was up). /jsz reads the running config each time.
func maxStorage(ctx context.Context, t *testing.T, s *framework.Stack) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, srv := range servers {
		pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, srv+"-0", metav1.GetOptions{})
		if err != nil || pod.Status.PodIP == "" {
			continue
		}
		resp, err := http.Get("http://" + pod.Status.PodIP + ":8222/jsz")
		if err != nil {
			continue
		}
		var v struct {
			Config struct {
				MaxStorage int64 `json:"max_storage"`
			} `json:"config"`
		}
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err == nil {
			out[srv] = v.Config.MaxStorage
		}
	}
	return out
}

// Growing the example cluster's claims from 1Gi to 2Gi on a StorageClass
// that allows expansion, under publishers on an R3 and an R1 stream: each
// claim grows in place, one server at a time (ExpandingStorage), no pod is
// deleted, every claim reports 2Gi, and the derived max_file_store (95% of
// the claim) is then reloaded: every server's /jsz reports it, applied by
// Reload. Every acknowledged message is readable.
func TestStorageGrowsInPlaceOnAnExpandableClass(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsStorageGrow)
	storageClass(ctx, t, s, "expandable", true)
	conn, js := clusterOf(ctx, t, s, 3, withClass("expandable"))
	createStreamOn(ctx, t, conn, js, "ONE", []string{"demo-1"})
	orders := framework.StartPublisher(ctx, js, "ORDERS.new")
	ones := framework.StartPublisher(ctx, js, "ONE.new")
	pods := []string{"demo-0-0", "demo-1-0", "demo-2-0"}
	before := s.PodUIDs(ctx, s.NS, pods...)
	uidsBefore, _ := claims(ctx, t, s)
	t.Logf("max_storage before: %v", maxStorage(ctx, t, s))

	start := time.Now()
	patchCluster(ctx, t, s, storagePatch)
	var messages []string
	poll.Eventually(t, 6*time.Minute, 250*time.Millisecond, "every claim 2Gi, Settled and UpToDate", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if c := conditionOf(nc, clusterv1beta1.ConditionProgressing); c.Reason == clusterv1beta1.ReasonExpandingStorage && !slices.Contains(messages, c.Message) {
			messages = append(messages, c.Message)
		}
		if _, capacity := claims(ctx, t, s); len(capacity) != 3 || capacity["demo-0"] != "2Gi" || capacity["demo-1"] != "2Gi" || capacity["demo-2"] != "2Gi" {
			return fmt.Errorf("claims %v; %s", capacity, framework.Conditions(nc))
		}
		if nc.Status.ObservedGeneration != nc.Generation {
			return fmt.Errorf("generation %d not observed yet", nc.Generation)
		}
		return framework.CheckSettledUpToDate(nc)
	})
	t.Logf("every claim 2Gi and the cluster up to date %s after the edit", time.Since(start).Round(time.Millisecond))
	for _, m := range messages {
		t.Logf("seen: ExpandingStorage: %s", m)
	}
	if len(messages) == 0 {
		t.Error("Progressing never read ExpandingStorage")
	}
	if after := s.PodUIDs(ctx, s.NS, pods...); !equalMaps(after, before) {
		t.Errorf("pods were deleted: %v, before %v", after, before)
	}
	if uids, _ := claims(ctx, t, s); !equalMaps(uids, uidsBefore) {
		t.Errorf("claims were replaced: %v, before %v", uids, uidsBefore)
	}
	nc, _ := s.Cluster(ctx, s.NS, "demo")
	if nc.Status.Config == nil || nc.Status.Config.AppliedBy != clusterv1beta1.AppliedByReload {
		t.Errorf("status.config %+v, want the raised max_file_store applied by Reload", nc.Status.Config)
	}
	two := resource.MustParse("2Gi")
	want := two.Value() * 95 / 100
	poll.Eventually(t, time.Minute, 250*time.Millisecond, "every server reports max_storage 95% of 2Gi", func() error {
		got := maxStorage(ctx, t, s)
		for _, srv := range servers {
			if got[srv] != want {
				return fmt.Errorf("max_storage %v, want %d", got, want)
			}
		}
		return nil
	})
	verifyNoLossOf(ctx, t, s, "ORDERS", orders)
	verifyNoLossOf(ctx, t, s, "ONE", ones)
}

// The same edit on a StorageClass that cannot expand replaces the servers
// one at a time, highest ordinal first, each with a new 2Gi claim, under
// the same publishers. demo-1, which holds the R1 stream ONE, is held with
// ReplaceBlocked (moving ONE would take demo-1's copy of ORDERS for good,
// see TestReplaceServerUnderLoad) until ONE is raised to R3 as the hold
// says; no acknowledged message is lost.
func TestStorageReplacesServersOnAClassThatCannotExpand(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	s := framework.Shared(ctx, t, nsStorageReplace)
	storageClass(ctx, t, s, "fixed", false)
	conn, js := clusterOf(ctx, t, s, 3, withClass("fixed"))
	createStreamOn(ctx, t, conn, js, "ONE", []string{"demo-1"})
	orders := framework.StartPublisher(ctx, js, "ORDERS.new")
	ones := framework.StartPublisher(ctx, js, "ONE.new")
	uidsBefore, _ := claims(ctx, t, s)

	start := time.Now()
	patchCluster(ctx, t, s, storagePatch)
	var phases []string
	replaced := map[string]time.Duration{}
	raised := false
	poll.Eventually(t, 15*time.Minute, 250*time.Millisecond, "every server replaced with a 2Gi claim, Settled and UpToDate", func() error {
		nc, err := s.Cluster(ctx, s.NS, "demo")
		if err != nil {
			return err
		}
		if c := conditionOf(nc, clusterv1beta1.ConditionProgressing); c.Reason == clusterv1beta1.ReasonReplaceBlocked && !raised {
			t.Logf("held after %s: %s", time.Since(start).Round(time.Millisecond), c.Message)
			requireContains(t, "the hold", c.Message, "$G/ONE", "--replicas 3")
			// The hold can show while the server replaced before is still
			// rejoining; nats-server then has no third peer yet ("no
			// suitable peers for placement"), so the edit is retried, as a
			// user would.
			poll.Eventually(t, 2*time.Minute, 500*time.Millisecond, "ONE raised to 3 replicas", func() error {
				_, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: "ONE", Subjects: []string{"ONE.>"}, Replicas: 3, Storage: jetstream.FileStorage,
					Duplicates: 10 * time.Minute})
				return err
			})
			raised = true
		}
		if len(nc.Status.Removals) > 1 {
			t.Errorf("two servers removed at once: %+v", nc.Status.Removals)
		}
		for _, r := range nc.Status.Removals {
			if p := r.Server + " " + string(r.Phase); !slices.Contains(phases, p) {
				phases = append(phases, p)
			}
		}
		uids, capacity := claims(ctx, t, s)
		for _, srv := range servers {
			if _, ok := replaced[srv]; !ok && uids[srv] != "" && uids[srv] != uidsBefore[srv] && capacity[srv] == "2Gi" {
				replaced[srv] = time.Since(start)
			}
		}
		if len(replaced) < 3 {
			return fmt.Errorf("replaced so far %v; removals %+v; %s", replaced, nc.Status.Removals, framework.Conditions(nc))
		}
		return framework.CheckSettledUpToDate(nc)
	})
	t.Logf("phases seen in status.removals: %v", phases)
	t.Logf("claims replaced with 2Gi ones after: %v", replaced)
	if !raised {
		t.Error("demo-1 was replaced without the hold for ONE, its R1 stream")
	}
	verifyNoLossOf(ctx, t, s, "ORDERS", orders)
	verifyNoLossOf(ctx, t, s, "ONE", ones)
}
