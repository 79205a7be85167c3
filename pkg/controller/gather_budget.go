package controller

import (
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/nats-operator/nats-operator/pkg/render"
)

// gatherBudget reads, as a step is about to be written, what the budget
// check needs (disruption.go): the cluster's PodDisruptionBudget and the pod
// of each server f found running (a StatefulSet not stopped), from the
// caches as they are now, not as they were when f was gathered.
func (g *gatherer) gatherBudget(f *facts) (budgetView, error) {
	nc := f.nc
	view := budgetView{pods: map[string]*corev1.Pod{}}
	pdb, err := g.src.PDBs.PodDisruptionBudgets(nc.Namespace).Get(render.PDBName(nc.Name))
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return view, err
	default:
		view.pdb = pdb
	}
	for _, so := range f.servers {
		if so.statefulSet == nil || stopped(so.statefulSet) {
			continue
		}
		pod, err := g.src.Pods.Pods(nc.Namespace).Get(render.PodName(nc.Name, so.ordinal))
		switch {
		case apierrors.IsNotFound(err):
			pod = nil
		case err != nil:
			return view, err
		}
		view.pods[so.name] = pod
	}
	return view, nil
}
