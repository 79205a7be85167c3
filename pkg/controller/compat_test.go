package controller

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/observe"
	"github.com/nats-operator/nats-operator/pkg/render"
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
			// This release adds zone spreading and the exporter sidecar
			// to every pod (TestAnUpgradeFromE57d870RestartsOnceForTheSidecar):
			// with both brought to this release, what remains is proven
			// to cause no restart.
			objs.Cluster.Spec.Metrics.Enabled = new(false)
			for _, sts := range objs.StatefulSets {
				sts.Spec.Template.Spec.Affinity = render.DefaultAffinity(objs.Cluster.Name)
			}
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
			assertActions(t, first, "create networkpolicies "+objs.Cluster.Name, "patch natsclusters "+objs.Cluster.Name, "update natsclusters/status "+objs.Cluster.Name)
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
			f.kubeObjects = append(f.kubeObjects, render.NetworkPolicy(st, DefaultControllerNamespace))
			assertActions(t, f.sync())
		})
	}
}

// The objects of e57d870 as they are: the first sync restarts the highest
// server, one at a time, and the restart reason names what changed in the
// pod template (the spreading across zones and the exporter sidecar), not
// the config, whose revision is kept.
func TestAnUpgradeFromE57d870RestartsOnceForTheSidecar(t *testing.T) {
	objs := rt.LoadObjects(t, "../render/testdata/legacy-e57d870/ephemeral.yaml")
	var kubeObjects []runtime.Object
	for _, s := range objs.Services {
		kubeObjects = append(kubeObjects, s)
	}
	kubeObjects = append(kubeObjects, objs.PDB)
	snap := &observe.Snapshot{Verdict: observe.Verdict{Status: metav1.ConditionTrue, Reason: clusterv1beta1.ReasonAllGroupsCurrent, Message: "every Raft group has a leader and every member is current"}}
	for i, sts := range objs.StatefulSets {
		sts.UID = types.UID(fmt.Sprintf("uid-sts-%d", i))
		kubeObjects = append(kubeObjects, objs.ConfigMaps[i], sts, podOf(sts))
		snap.Servers = append(snap.Servers, observe.Server{Name: sts.Name, Answered: true, ConfigRevision: objs.Cluster.Status.Config.Revision, Version: "2.15.2"})
	}
	f := newFixture(t, objs.Cluster, kubeObjects...)
	f.snap = snap
	st := writtenStatus(f.sync())
	const why = "the pod template of plain-0 changes (scheduling, the metrics container), which only a restart applies"
	if r := st.Status.Rollout; r == nil || r.Current != "plain-0" || r.RestartReason != why {
		t.Errorf("rollout %+v, want plain-0 restarted because %q", st.Status.Rollout, why)
	}
	if c := st.Status.Config; c == nil || c.Revision != objs.Cluster.Status.Config.Revision {
		t.Errorf("config %+v, want the legacy revision %s until the restart is done", c, objs.Cluster.Status.Config.Revision)
	}
	// status.config.restartReason says why from the rollout's first step on.
	if c := st.Status.Config; c == nil || c.RestartReason != why || c.AppliedBy != objs.Cluster.Status.Config.AppliedBy {
		t.Errorf("config %+v, want restartReason %q at the first step and appliedBy %q kept", c, why, objs.Cluster.Status.Config.AppliedBy)
	}
}
