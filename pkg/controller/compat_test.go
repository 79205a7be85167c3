package controller

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An operator upgrade restarts no cluster: the objects written by the
// release before the config and template revisions were separated
// (pkg/render/testdata/legacy-e57d870), synced by this controller, give no
// write to any server's objects and no pod deletion. The NatsCluster gets
// the finalizer (one metadata patch) and its status is written
// once, because the fixture's status holds only status.config and the
// observation fills in the rest; a second sync writes nothing at all.
func TestObjectsOfThePreviousReleaseCauseNoWriteAndNoRestart(t *testing.T) {
	for _, file := range []string{"jetstream-claim.yaml", "ephemeral.yaml", "operator-mode.yaml"} {
		t.Run(file, func(t *testing.T) {
			objs := rt.LoadObjects(t, "../render/testdata/legacy-e57d870/"+file)
			legacyRev := objs.Cluster.Status.Config.Revision
			var kubeObjects []runtime.Object
			for _, s := range objs.Services {
				kubeObjects = append(kubeObjects, s)
			}
			kubeObjects = append(kubeObjects, objs.PDB)
			for _, sec := range objs.Secrets {
				kubeObjects = append(kubeObjects, sec)
			}
			snap := &observe.Snapshot{Verdict: observe.Verdict{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonAllGroupsCurrent, Message: "every Raft group has a leader and every member is current"}}
			for i, sts := range objs.StatefulSets {
				sts.UID = types.UID(fmt.Sprintf("uid-sts-%d", i))
				kubeObjects = append(kubeObjects, objs.ConfigMaps[i], sts, podOf(sts))
				snap.Servers = append(snap.Servers, observe.Server{Name: sts.Name, Answered: true, ConfigRevision: legacyRev, Version: "2.15.2",
					JetStream: objs.Cluster.Spec.JetStream != nil, MetaLeader: objs.StatefulSets[0].Name})
			}
			if objs.Cluster.Spec.JetStream != nil {
				snap.MetaLeader = objs.StatefulSets[0].Name
				meta := observe.Group{Kind: observe.GroupMeta, Leader: snap.MetaLeader}
				for i := range snap.Servers {
					snap.Servers[i].MetaMembers = []string{snap.Servers[0].Name, snap.Servers[1].Name, snap.Servers[2].Name}
					meta.Members = append(meta.Members, observe.Member{Name: snap.Servers[i].Name, Current: true})
				}
				snap.Groups = []observe.Group{meta}
			}
			f := newFixture(t, objs.Cluster, kubeObjects...)
			if objs.OperatorTrust != nil {
				f.natsObjects = append(f.natsObjects, objs.OperatorTrust)
				for _, at := range objs.AccountTrusts {
					f.natsObjects = append(f.natsObjects, at)
				}
			}
			f.snap = snap
			f.nc.Finalizers = nil // the previous release added none
			first := f.sync()
			assertActions(t, first, "patch natsclusters "+objs.Cluster.Name, "update natsclusters/status "+objs.Cluster.Name)
			if !hasFinalizer(writtenStatus(first)) {
				t.Errorf("finalizers %v, want %s added", writtenStatus(first).Finalizers, clusterv1beta1.FinalizerStreams)
			}
			st := writtenStatus(first)
			if p := meta.FindStatusCondition(st.Status.Conditions, clusterv1beta1.ConditionProgressing); p == nil || p.Reason != clusterv1beta1.ReasonUpToDate {
				t.Errorf("Progressing %+v, want UpToDate", p)
			}
			if st.Status.Config == nil || st.Status.Config.Revision != legacyRev || st.Status.Rollout != nil {
				t.Errorf("config %+v rollout %+v, want revision %s kept and no rollout", st.Status.Config, st.Status.Rollout, legacyRev)
			}
			f.nc = st
			assertActions(t, f.sync())
		})
	}
}
