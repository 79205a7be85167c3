package localnode

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// nodeLabels are the labels register gives the Node.
func (n *Node) nodeLabels() map[string]string {
	l := map[string]string{"kubernetes.io/hostname": n.opts.NodeName}
	for k, v := range n.opts.Labels {
		l[k] = v
	}
	return l
}

// unschedulable says why the scheduler would not put pod on this node
// (its nodeSelector, a taint it does not tolerate), "" when it would. Node
// affinity and resources are not checked.
func (n *Node) unschedulable(pod *corev1.Pod) string {
	labels := n.nodeLabels()
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := labels[k]; !ok || got != v {
			return fmt.Sprintf("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector (%s=%s).", k, v)
		}
	}
taints:
	for _, taint := range n.opts.Taints {
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		for _, tol := range pod.Spec.Tolerations {
			if tol.ToleratesTaint(klog.Background(), &taint, false) {
				continue taints
			}
		}
		return fmt.Sprintf("0/1 nodes are available: 1 node(s) had untolerated taint {%s: %s}.", taint.Key, taint.Value)
	}
	return ""
}

// markUnschedulable sets PodScheduled False Unschedulable, as the scheduler
// reports a pod it cannot place.
func (n *Node) markUnschedulable(ctx context.Context, pod *corev1.Pod, why string) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == why {
			return
		}
	}
	p := pod.DeepCopy()
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: why, LastTransitionTime: metav1.Now()}
	replaced := false
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodScheduled {
			p.Status.Conditions[i], replaced = cond, true
		}
	}
	if !replaced {
		p.Status.Conditions = append(p.Status.Conditions, cond)
	}
	_, err := n.client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
		n.log.Error(err, "Marking pod unschedulable failed", "pod", klog.KObj(pod))
	}
}
