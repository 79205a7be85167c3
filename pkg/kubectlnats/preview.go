package kubectlnats

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/controller"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	"github.com/nats-operator/nats-operator/pkg/observe"
)

// previewer gathers and decides as a sync does (controller.Decide), on
// Sources that are a live cluster's caches or a set of manifests, and
// observes with obs. It writes nothing.
type previewer struct {
	src  controller.Sources
	obs  controller.Observer
	stop func()
}

// Decide is what one sync of nc would decide.
func (p *previewer) Decide(ctx context.Context, nc *clusterv1beta1.NatsCluster, now metav1.Time) (*controller.Preview, error) {
	return controller.Decide(ctx, p.src, p.obs, nc, now)
}

// livePreviewer reads the live cluster through the informers the controller
// runs (restricted the same way), and asks the servers at their pod IPs, as
// the controller does.
func livePreviewer(ctx context.Context, cfg *rest.Config, ns string) (*previewer, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	nats, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	inf, err := controller.NewInformerSet(kube, nats, meta, []string{ns}, 0)
	if err != nil {
		cancel()
		return nil, err
	}
	// Sources ask each informer of the set for its lister, which is what
	// makes the factories start it: before Start.
	src := controller.SourcesFor(inf.Informers, kube, nil)
	inf.Start(ctx.Done())
	obs := observe.New(observe.Options{Name: "kubectl-nats"})
	stop := func() {
		cancel()
		inf.Shutdown()
		obs.Close()
	}
	syncCtx, done := context.WithTimeout(ctx, 30*time.Second)
	defer done()
	if err := inf.WaitForCacheSync(syncCtx); err != nil {
		stop()
		return nil, err
	}
	return &previewer{src: src, obs: obs, stop: stop}, nil
}

// fixedObserver answers every observation with one Snapshot.
type fixedObserver struct{ snap *observe.Snapshot }

func (f fixedObserver) Observe(context.Context, observe.Target) *observe.Snapshot { return f.snap }

// offlineUID is the UID of the simulated NatsCluster (owner references
// name it).
const offlineUID = types.UID("00000000-0000-0000-0000-00000000plan")

// staticPreviewer decides on objs alone (controller.StaticSources: no
// client, no informer), observing snap.
func staticPreviewer(objs []runtime.Object, snap *observe.Snapshot) (*previewer, error) {
	src, err := controller.StaticSources(objs...)
	if err != nil {
		return nil, err
	}
	return &previewer{src: src, obs: fixedObserver{snap}, stop: func() {}}, nil
}

// settledCluster simulates old running and settled: the objects the
// controller creates for it (Secrets, ConfigMaps, StatefulSets, Services,
// the PDB), a Ready pod per server, status.config at its revision, and an
// observation of every server answering on its revision, one meta group
// with every server current, and the streams given (each with a copy on
// every server).
func settledCluster(ctx context.Context, old *manifest, streams []streamFlag) (*clusterv1beta1.NatsCluster, []runtime.Object, []runtime.Object, *observe.Snapshot, error) {
	nc := old.cluster.DeepCopy()
	nc.UID = offlineUID
	nc.Generation = 1
	nc.Finalizers = []string{clusterv1beta1.FinalizerStreams}
	natsObjs := []runtime.Object{}
	for _, t := range old.operatorTrusts {
		natsObjs = append(natsObjs, t)
	}
	for _, t := range old.accountTrusts {
		natsObjs = append(natsObjs, t)
	}
	kubeObjs := []runtime.Object{}
	for _, s := range old.secrets {
		kubeObjs = append(kubeObjs, s)
	}
	empty := &observe.Snapshot{Verdict: observe.Verdict{Status: metav1.ConditionUnknown, Reason: clusterv1beta1.ReasonObservationFailed, Message: "not created yet"}}
	first, err := staticPreviewer(slices.Concat(kubeObjs, natsObjs, []runtime.Object{nc}), empty)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	p, err := first.Decide(ctx, nc, metav1.Now())
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if p.Output == nil {
		return nil, nil, nil, nil, &invalidError{fmt.Sprintf("--from: the old manifest does not render: %s: %s", p.Decision.Progressing.Reason, p.Decision.Progressing.Message)}
	}
	out := p.Output
	for _, s := range p.Secrets {
		kubeObjs = append(kubeObjs, s)
	}
	kubeObjs = append(kubeObjs, out.ClientService.DeepCopy(), out.HeadlessService.DeepCopy(), out.PDB.DeepCopy())
	snap := &observe.Snapshot{
		Cluster:    nc.Namespace + "/" + nc.Name,
		MetaLeader: out.Servers[0].Name,
		Verdict:    observe.Verdict{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonAllGroupsCurrent, Message: "simulated: every Raft group has a leader and every member is current"},
	}
	meta := observe.Group{Kind: observe.GroupMeta, Leader: out.Servers[0].Name}
	var names []string
	for i, s := range out.Servers {
		sts := s.StatefulSet.DeepCopy()
		sts.UID = types.UID(fmt.Sprintf("offline-sts-%d", i))
		kubeObjs = append(kubeObjs, s.ConfigMap.DeepCopy(), sts, readyPod(sts, i))
		names = append(names, s.Name)
		meta.Members = append(meta.Members, observe.Member{Name: s.Name, Current: true})
	}
	for _, s := range out.Servers {
		snap.Expected = append(snap.Expected, s.Name)
		snap.Servers = append(snap.Servers, observe.Server{
			Name: s.Name, ReportedName: s.Name, Answered: true, Healthy: true, Version: s.Facts.Version,
			ConfigRevision: s.Revision, JetStream: nc.Spec.JetStream != nil, Clustered: len(out.Servers) > 1,
			MetaLeader: out.Servers[0].Name, MetaMembers: names, Routes: others(names, s.Name),
		})
	}
	snap.Groups = append(snap.Groups, meta)
	byAccount := map[string]*observe.AccountStreams{}
	var accounts []string
	for _, st := range streams {
		g := observe.Group{Kind: observe.GroupStream, Account: st.account, AccountName: st.account, Name: st.name, Leader: out.Servers[0].Name}
		g.Members = meta.Members
		snap.Groups = append(snap.Groups, g)
		if byAccount[st.account] == nil {
			byAccount[st.account] = &observe.AccountStreams{Account: st.account, AccountName: st.account}
			accounts = append(accounts, st.account)
		}
		byAccount[st.account].Streams = append(byAccount[st.account].Streams, observe.StreamInfo{Name: st.name, Replicas: len(names)})
	}
	for _, a := range accounts {
		snap.Streams = append(snap.Streams, *byAccount[a])
	}
	nc.Status = clusterv1beta1.NatsClusterStatus{
		ObservedGeneration: 1, Replicas: nc.Spec.Replicas, ReadyReplicas: nc.Spec.Replicas,
		Config: &clusterv1beta1.ConfigStatus{Revision: out.Revision, AppliedBy: clusterv1beta1.AppliedByRestart},
		Conditions: []metav1.Condition{{Type: clusterv1beta1.ConditionProgressing, Status: metav1.ConditionFalse,
			Reason: clusterv1beta1.ReasonUpToDate, Message: "simulated", ObservedGeneration: 1}},
	}
	return nc, kubeObjs, append(natsObjs, nc), snap, nil
}

func others(names []string, self string) []string {
	var out []string
	for _, n := range names {
		if n != self {
			out = append(out, n)
		}
	}
	return out
}

// readyPod is the pod the StatefulSet controller would create, Ready.
func readyPod(sts *appsv1.StatefulSet, i int) *corev1.Pod {
	t := true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: sts.Namespace, Name: sts.Name + "-0", UID: types.UID("offline-pod-" + sts.Name),
			Labels: sts.Spec.Template.Labels, Annotations: sts.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: &t}},
		},
		Spec: *sts.Spec.Template.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("192.0.2.%d", i+1),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}
