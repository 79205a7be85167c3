package localnode

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

var everything = labels.Everything()

// heartbeatPeriod is how often the node renews its Lease and refreshes the
// Ready condition; the node lifecycle controller's grace period is 40-50s.
const heartbeatPeriod = 10 * time.Second

// register creates or refreshes the Node object and its Lease.
func (n *Node) register(ctx context.Context) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.opts.NodeName,
			Labels: map[string]string{
				"kubernetes.io/hostname":           n.opts.NodeName,
				"kubernetes.io/os":                 runtime.GOOS,
				"kubernetes.io/arch":               runtime.GOARCH,
				"node.kubernetes.io/instance-type": "localnode",
			},
		},
		Spec: corev1.NodeSpec{Taints: n.opts.Taints},
	}
	for k, v := range n.opts.Labels {
		node.Labels[k] = v
	}
	_, err := n.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := n.updateNodeStatus(ctx); err != nil {
		return err
	}
	return n.renewLease(ctx)
}

func (n *Node) nodeStatus(now metav1.Time) corev1.NodeStatus {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:             resource.MustParse("1000"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "localnode has sufficient memory available"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "localnode has no disk pressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "localnode has sufficient PID available"),
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "localnode is posting ready status"),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
			{Type: corev1.NodeHostName, Address: n.opts.NodeName},
		},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID:               "localnode",
			KernelVersion:           kernelVersion(),
			OSImage:                 "localnode",
			ContainerRuntimeVersion: "localnode://1",
			KubeletVersion:          "v1.37.2",
			KubeProxyVersion:        "v1.37.2",
			OperatingSystem:         runtime.GOOS,
			Architecture:            runtime.GOARCH,
		},
	}
}

// updateNodeStatus writes the node status, keeping each condition's
// transition time while its status holds.
func (n *Node) updateNodeStatus(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return n.tryUpdateNodeStatus(ctx) })
}

func (n *Node) tryUpdateNodeStatus(ctx context.Context) error {
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.opts.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	st := n.nodeStatus(now)
	for i, c := range st.Conditions {
		for _, old := range node.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				st.Conditions[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	node.Status = st
	_, err = n.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

func (n *Node) renewLease(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return n.tryRenewLease(ctx) })
}

func (n *Node) tryRenewLease(ctx context.Context) error {
	leases := n.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, n.opts.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.opts.NodeName, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(n.opts.NodeName),
				LeaseDurationSeconds: ptr.To[int32](40),
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.HolderIdentity = ptr.To(n.opts.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](40)
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// heartbeat renews the Lease and the Ready condition until ctx ends.
func (n *Node) heartbeat(ctx context.Context) {
	t := time.NewTicker(heartbeatPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := n.renewLease(ctx); err != nil && ctx.Err() == nil {
			n.log.Error(err, "Renewing lease failed")
		}
		if err := n.updateNodeStatus(ctx); err != nil && ctx.Err() == nil {
			n.log.Error(err, "Updating node status failed")
		}
	}
}

// bind assigns a pending pod to this node through the Binding subresource.
func (n *Node) bind(ctx context.Context, pod *corev1.Pod) {
	err := n.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: n.opts.NodeName},
	}, metav1.CreateOptions{})
	switch {
	case err == nil:
		n.log.V(2).Info("Bound pod", "pod", klog.KObj(pod))
	case apierrors.IsConflict(err), apierrors.IsNotFound(err), ctx.Err() != nil:
	default:
		n.log.Error(err, "Binding pod failed", "pod", klog.KObj(pod))
	}
}

// memTotal returns the machine's memory in bytes.
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 8 << 30
}

func kernelVersion() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
