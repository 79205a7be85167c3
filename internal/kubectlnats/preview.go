package kubectlnats

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/controller"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	natsfake "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/fake"
	"github.com/nats-operator/nats-operator/pkg/observe"
)

// previewer is a controller whose caches are filled and that is only asked
// to Decide: it never runs a worker, so it writes nothing.
type previewer struct {
	ctrl *controller.Controller
	stop func()
}

// startController builds the controller exactly as cmd/nats-operator does
// (the same informers, restricted the same way), starts the caches and
// waits for them.
func startController(ctx context.Context, kube kubernetes.Interface, nats versioned.Interface, meta metadata.Interface, ns string) (*previewer, error) {
	ctx, cancel := context.WithCancel(ctx)
	inf, err := controller.NewInformerSet(kube, nats, meta, []string{ns}, 0)
	if err != nil {
		cancel()
		return nil, err
	}
	ctrl := controller.New(ctx, kube, nats, inf.Informers, controller.NewMetrics(prometheus.NewRegistry()))
	inf.Start(ctx.Done())
	stop := func() {
		cancel()
		inf.Shutdown()
	}
	syncCtx, done := context.WithTimeout(ctx, 30*time.Second)
	defer done()
	if err := inf.WaitForCacheSync(syncCtx); err != nil {
		stop()
		return nil, err
	}
	return &previewer{ctrl: ctrl, stop: stop}, nil
}

// livePreviewer reads the live cluster; the controller's observer asks the
// servers at their pod IPs, as the controller does.
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
	return startController(ctx, kube, nats, meta, ns)
}

// fixedObserver answers every observation with one Snapshot.
type fixedObserver struct{ snap *observe.Snapshot }

func (f fixedObserver) Observe(context.Context, observe.Target) *observe.Snapshot { return f.snap }
func (fixedObserver) System(context.Context, observe.Target) (*observe.SystemClient, error) {
	return nil, observe.ErrNoSystemCredentials
}
func (fixedObserver) Forget(string) {}
func (fixedObserver) Close()        {}

// offlineUID is the UID of the simulated NatsCluster (owner references
// name it).
const offlineUID = types.UID("00000000-0000-0000-0000-00000000plan")

// fakePreviewer is a controller on fake clientsets holding objs, observing
// snap.
func fakePreviewer(ctx context.Context, ns string, kubeObjs, natsObjs []runtime.Object, snap *observe.Snapshot) (*previewer, error) {
	kube := k8sfake.NewClientset(kubeObjs...)
	nats := natsfake.NewSimpleClientset(natsObjs...)
	scheme := metadatafake.NewTestScheme()
	_ = metav1.AddMetaToScheme(scheme)
	var metaObjs []runtime.Object
	for _, o := range kubeObjs {
		if s, ok := o.(*corev1.Secret); ok {
			metaObjs = append(metaObjs, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: *s.ObjectMeta.DeepCopy()})
		}
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme, metaObjs...)
	p, err := startController(ctx, kube, nats, meta, ns)
	if err != nil {
		return nil, err
	}
	p.ctrl.SetObserver(fixedObserver{snap})
	return p, nil
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
	first, err := fakePreviewer(ctx, nc.Namespace, kubeObjs, append(natsObjs, nc), empty)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	p, err := first.ctrl.Decide(ctx, nc, metav1.Now())
	first.stop()
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
