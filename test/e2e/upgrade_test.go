package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/kubeutil"
	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	"github.com/nats-operator/nats-operator/test/framework"
)

// Upgrading the controller (a new nats-operator release) restarts no server and rewrites no object: a
// 3-server JetStream cluster whose objects are exactly those the release
// before separate config and template revisions wrote (e57d870, committed
// under pkg/render/testdata/legacy-e57d870) runs on real nats-servers; then
// this controller starts on it. It finds the cluster up to date at the
// revision it carries, writes no ConfigMap, StatefulSet, Service, PDB or pod,
// and every pod keeps its UID. Its only writes are the NatsCluster's status
// and one metadata patch adding the finalizer cluster.nats-operator.io/streams
// (the previous release set none), which restarts nothing, and the creation
// of the NetworkPolicy the previous release did not have.
//
// Since the podTemplate release every pod also has the exporter sidecar and
// spreads across zones, which an upgrade from e57d870 takes with one
// restart of each server (pkg/controller
// TestAnUpgradeFromE57d870RestartsOnceForTheSidecar): here the legacy
// objects get this release's spreading and the cluster runs without the
// sidecar, so what remains is proven to restart nothing.
func TestUpgradingTheControllerRestartsNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	objs := rendertest.LoadObjects(t, "../../pkg/render/testdata/legacy-e57d870/jetstream-claim.yaml")
	ns, name := objs.Cluster.Namespace, objs.Cluster.Name
	// The legacy objects are in namespace nats (their revision covers the
	// names rendered in it), which no other test of the package stack uses.
	s := framework.OwnController(ctx, t, ns)
	s.Controller.Stop()
	legacyRev := objs.Cluster.Status.Config.Revision
	s.CreateNamespace(ctx, t, ns)

	// The NatsCluster, with the status.config the previous controller wrote.
	// It keeps the spec its objects were rendered from, without the test
	// clusters' spec.lameDuck (framework.TestLameDuck): another grace period
	// is a change that restarts every server, which is what this test proves
	// the upgrade does not do.
	nc := objs.Cluster.DeepCopy()
	nc.UID, nc.Generation, nc.Status = "", 0, objs.Cluster.Status
	nc.Spec.Metrics.Enabled = new(false)
	created, err := s.Nats.ClusterV1beta1().NatsClusters(ns).Create(ctx, nc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = objs.Cluster.Status
	created.Status.ObservedGeneration = created.Generation
	if _, err := s.Nats.ClusterV1beta1().NatsClusters(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its objects, owned by it: only the owner's UID differs from the files.
	own := func(m *metav1.ObjectMeta) {
		m.OwnerReferences = []metav1.OwnerReference{render.OwnerReference(created)}
		m.UID = ""
	}
	for _, svc := range objs.Services {
		own(&svc.ObjectMeta)
		if _, err := s.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	own(&objs.PDB.ObjectMeta)
	if _, err := s.Kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, objs.PDB, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []string
	for i, sts := range objs.StatefulSets {
		own(&objs.ConfigMaps[i].ObjectMeta)
		if _, err := s.Kube.CoreV1().ConfigMaps(ns).Create(ctx, objs.ConfigMaps[i], metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		own(&sts.ObjectMeta)
		sts.Spec.Template.Spec.Affinity = render.DefaultAffinity(name)
		if _, err := s.Kube.AppsV1().StatefulSets(ns).Create(ctx, sts, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, sts.Name+"-0")
	}

	// The previous release's cluster runs: every pod Ready, every server
	// answering with the legacy revision and the JetStream meta group formed.
	obs := observe.New(observe.Options{Name: "upgrade-test"})
	defer obs.Close()
	poll.Eventually(t, 4*time.Minute, 2*time.Second, "the legacy cluster runs and is settled", func() error {
		target := observe.Target{Cluster: ns + "/" + name}
		for _, p := range pods {
			pod, err := s.Kube.CoreV1().Pods(ns).Get(ctx, p, metav1.GetOptions{})
			if err != nil || !kubeutil.PodReady(pod) {
				return fmt.Errorf("pod %s not Ready (%v)", p, err)
			}
			target.Servers = append(target.Servers, observe.ServerAddr{Name: p[:len(p)-len("-0")], Host: pod.Status.PodIP})
		}
		snap := obs.Observe(ctx, target)
		for _, srv := range snap.Servers {
			if !srv.Answered || srv.ConfigRevision != legacyRev {
				return fmt.Errorf("%s answered %v with revision %q", srv.Name, srv.Answered, srv.ConfigRevision)
			}
		}
		if snap.Verdict.Status != metav1.ConditionTrue {
			return fmt.Errorf("not settled: %s", snap.Verdict.Message)
		}
		return nil
	})
	uids := s.PodUIDs(ctx, ns, pods...)

	// The upgrade: this controller starts on the running cluster.
	s.Controller.Start()
	got := s.WaitSettledUpToDate(ctx, t, ns, name, 2*time.Minute)
	if got.Status.Config == nil || got.Status.Config.Revision != legacyRev {
		t.Errorf("status.config %+v, want revision %s kept", got.Status.Config, legacyRev)
	}
	time.Sleep(5 * time.Second) // a few more syncs, each of which could write
	for _, res := range []string{"configmaps", "statefulsets", "services", "poddisruptionbudgets", "pods"} {
		if n, _ := s.Controller.Metric("nats_operator_api_writes_total", `resource="`+res+`"`); n != 0 {
			t.Errorf("the upgraded controller made %v writes to %s, want 0", n, res)
		}
	}
	// The NetworkPolicy, new in this release: created once.
	if n, _ := s.Controller.Metric("nats_operator_api_writes_total", `resource="networkpolicies"`); n != 1 {
		t.Errorf("the upgraded controller made %v writes to networkpolicies, want 1 (creating it)", n)
	}
	// The NatsCluster itself: one patch, the finalizer, and nothing else.
	if n, _ := s.Controller.Metric("nats_operator_api_writes_total", `resource="natsclusters"`); n != 1 {
		t.Errorf("the upgraded controller made %v writes to natsclusters, want 1 (adding the finalizer)", n)
	}
	if got, err := s.Cluster(ctx, ns, name); err != nil || !slices.Contains(got.Finalizers, clusterv1beta1.FinalizerStreams) {
		t.Errorf("finalizers of the upgraded cluster (%v): want %s", err, clusterv1beta1.FinalizerStreams)
	}
	status, _ := s.Controller.Metric("nats_operator_api_writes_total", `resource="natsclusters/status"`)
	steps, _ := s.Controller.Metric("nats_operator_rollout_steps_total")
	t.Logf("after the upgrade: %v status writes, %v rollout steps, pods %v", status, steps, uids)
	if steps != 0 {
		t.Errorf("the upgraded controller took %v rollout steps, want 0", steps)
	}
	if after := s.PodUIDs(ctx, ns, pods...); fmt.Sprint(after) != fmt.Sprint(uids) {
		t.Errorf("pods restarted: before %v, after %v", uids, after)
	}
	var restarted []corev1.Event
	for _, reason := range []string{"ServerRestarted", "ServersRestarted"} {
		evs, _ := s.Events(ctx, ns, name, reason)
		restarted = append(restarted, evs...)
	}
	if len(restarted) > 0 {
		t.Errorf("restart events after the upgrade: %v", restarted[0].Message)
	}
}
