package controller

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// memoryChange is a running 3-server cluster (outOld) whose spec now asks
// for another memory limit (outNew): a restart of each server.
func memoryChange(t *testing.T) (nc *clusterv1beta1.NatsCluster, secret runtime.Object, outOld, outNew *render.Output) {
	t.Helper()
	old := rt.NewCluster("nats", "demo")
	secret, err := newSystemUserSecret(old)
	if err != nil {
		t.Fatal(err)
	}
	outOld = withSystemUser(t, old, secret)
	nc = rt.NewCluster("nats", "demo", rt.MemoryLimit("2Gi"))
	nc.Status.Config = &clusterv1beta1.ConfigStatus{Revision: outOld.Revision, AppliedBy: clusterv1beta1.AppliedByRestart}
	return nc, secret, outOld, withSystemUser(t, nc, secret)
}

// writtenStatefulSet is the StatefulSet name an action of acts updated.
func writtenStatefulSet(t *testing.T, acts []core.Action, name string) *appsv1.StatefulSet {
	t.Helper()
	for _, a := range acts {
		if u, ok := a.(core.UpdateAction); ok && a.GetResource().Resource == "statefulsets" {
			if sts := u.GetObject().(*appsv1.StatefulSet); sts.Name == name {
				return sts
			}
		}
	}
	t.Fatalf("StatefulSet %s not updated", name)
	return nil
}

// A StatefulSet an older release wrote with the RollingUpdate strategy gets
// OnDelete in the same write as its server's new template: the StatefulSet
// controller never sees the new template under RollingUpdate, where it
// would restart the pod before its ConfigMap is written. The template goes
// first, then the ConfigMap, then the pod.
func TestAStepWritesOnDeleteWithTheTemplate(t *testing.T) {
	nc, secret, outOld, _ := memoryChange(t)
	objs := running(t, outOld)
	for _, o := range objs {
		if sts, ok := o.(*appsv1.StatefulSet); ok {
			sts.Spec.UpdateStrategy = render.DigestedStrategy()
		}
	}
	f := newFixture(t, nc, append(objs, secret)...)
	f.snap = settled(outOld, outOld.Revision)
	acts := f.sync()
	assertActions(t, acts, "update statefulsets demo-2", "update configmaps demo-2-config", "delete pods demo-2-0", "update natsclusters/status demo")
	if got := writtenStatefulSet(t, acts, "demo-2").Spec.UpdateStrategy; got.Type != appsv1.OnDeleteStatefulSetStrategyType || got.RollingUpdate != nil {
		t.Errorf("the step wrote update strategy %+v, want OnDelete", got)
	}
}

// A step cut short after the template (the controller stopped), then the
// pod deleted by someone else: the StatefulSet controller recreated it from
// the new template, whose annotations name the target revision, while the
// ConfigMap still held the old config, which the server runs. The next step
// writes the ConfigMap and restarts that pod: a pod running when its
// ConfigMap was written runs the config before it, whatever its annotations
// say.
func TestAPodStartedBeforeItsConfigMapIsRestartedWithIt(t *testing.T) {
	nc, secret, outOld, outNew := memoryChange(t)
	objs := running(t, outOld)
	sts := outNew.Servers[2].StatefulSet.DeepCopy()
	for i, o := range objs {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			if o.Name == sts.Name {
				sts.UID = o.UID
				objs[i] = sts
			}
		case *corev1.Pod:
			if o.Name == sts.Name+"-0" {
				objs[i] = podOf(sts) // after its StatefulSet in objs: sts has its UID
			}
		}
	}
	f := newFixture(t, nc, append(objs, secret)...)
	f.snap = settled(outOld, outOld.Revision)
	acts := f.sync()
	assertActions(t, acts, "update configmaps demo-2-config", "delete pods demo-2-0", "update natsclusters/status demo")
}

// A step cut short after the template and the ConfigMap, before the pod's
// deletion (the controller was killed): the StatefulSet and ConfigMap are at
// the target, the pod still runs from the template before. Under OnDelete
// nothing else replaces that pod, so it is no step taken: the next sync
// takes demo-2's step again, which writes nothing but deletes the pod.
func TestAStepCutShortBeforeThePodsDeletionIsTakenAgain(t *testing.T) {
	nc, secret, outOld, outNew := memoryChange(t)
	objs := running(t, outOld)
	for i, o := range objs {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			if o.Name == "demo-2" {
				sts := outNew.Servers[2].StatefulSet.DeepCopy()
				sts.UID, sts.Status = o.UID, o.Status
				objs[i] = sts
			}
		case *corev1.ConfigMap:
			if o.Name == "demo-2-config" {
				objs[i] = outNew.Servers[2].ConfigMap.DeepCopy()
			}
		}
	}
	f := newFixture(t, nc, append(objs, secret)...)
	f.snap = settled(outOld, outOld.Revision)
	acts := f.sync()
	assertActions(t, acts, "delete pods demo-2-0", "update natsclusters/status demo")

	// The sync the step's status write brings, its pod cache still behind
	// the deletion: the pod it deleted is going, not a step to take again.
	f.nc = writtenStatus(acts)
	acts = f.sync()
	for _, a := range describe(acts) {
		if a == "delete pods demo-2-0" {
			t.Errorf("the pod was deleted again while the cache did not show its deletion yet: %v", describe(acts))
		}
	}
}
