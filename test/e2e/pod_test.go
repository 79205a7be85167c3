package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/localnode"
)

// withPodTemplate is the example cluster with a podTemplate: a toleration
// of the node's taint, a nodeSelector matching the node, the nats
// container's resources (moved from spec.resources) and an extra env var,
// and a sidecar (sleep, which nats's alpine image has; the local node runs
// it from the host). The sidecar's image is one the controller's default
// pod template policy (restricted) allows.
func withPodTemplate(o *unstructured.Unstructured) {
	if o.GetKind() != "NatsCluster" {
		return
	}
	unstructured.RemoveNestedField(o.Object, "spec", "resources")
	_ = unstructured.SetNestedField(o.Object, map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"team": "messaging"}},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"kubernetes.io/hostname": "localnode"},
			"tolerations":  []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "nats", "effect": "NoSchedule"}},
			"containers": []any{
				map[string]any{"name": "nats",
					"env":       []any{map[string]any{"name": "TEAM", "value": "messaging"}},
					"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "256Mi"}, "limits": map[string]any{"memory": "1Gi"}}},
				map[string]any{"name": "sidecar", "image": "nats:2.15.2-alpine", "command": []any{"sleep", "infinity"}},
			},
		},
	}, "spec", "podTemplate")
}

// A cluster with a podTemplate runs with it on a tainted node: the
// toleration, nodeSelector, resources, env var and sidecar are in every
// pod and the sidecar runs; a pod without the toleration would not be
// bound. Each server's exporter serves connections and JetStream figures;
// the NetworkPolicy follows the spec; the PodMonitor appears once its CRD
// is installed. Then a change of the podTemplate's resources restarts the
// servers one at a time under a publisher, 0 lost, the restart reason
// naming the nats container, and the controller's metrics show the
// rollout.
func TestPodTemplateMetricsAndNetworkPolicy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := framework.StartStackWithNode(ctx, t, localnode.Options{
		Taints: []corev1.Taint{{Key: "dedicated", Value: "nats", Effect: corev1.TaintEffectNoSchedule}},
	})
	s.CreateNamespace(ctx, t, s.NS)

	// A pod that does not tolerate the taint is not bound.
	stray := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: s.NS},
		Spec: corev1.PodSpec{
			// Namespace nats enforces the restricted Pod Security Standard.
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true), RunAsUser: new(int64(1000)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "c", Image: "busybox:1.37", Command: []string{"sleep", "infinity"},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: new(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		}}
	if _, err := s.Kube.CoreV1().Pods(s.NS).Create(ctx, stray, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	s.ApplyExample(ctx, t, s.NS, "natscluster-jetstream.yaml", withPodTemplate)
	s.WaitSettledUpToDate(ctx, t, s.NS, "demo", 3*time.Minute)
	checkPodTemplate(ctx, t, s, "100m")
	poll.Eventually(t, 30*time.Second, 250*time.Millisecond, "the stray pod marked Unschedulable", func() error {
		p, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, "stray", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable && p.Spec.NodeName == "" {
				t.Logf("stray pod: %s", c.Message)
				return nil
			}
		}
		return fmt.Errorf("node %q conditions %+v", p.Spec.NodeName, p.Status.Conditions)
	})

	_, pub := loadCluster(ctx, t, s)
	checkExporters(ctx, t, s)
	checkNetworkPolicy(ctx, t, s)
	checkPodMonitor(ctx, t, s)

	before, err := s.Cluster(ctx, s.NS, "demo")
	if err != nil {
		t.Fatal(err)
	}
	want := expectedOrder(before.Status.JetStream.MetaLeader)
	tr, err := s.StartTracker(ctx, s.NS, "demo", servers, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Stop()
	applied := time.Now()
	if _, err := s.Nats.ClusterV1beta1().NatsClusters(s.NS).Patch(ctx, "demo", types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/spec/podTemplate/spec/containers/0/resources/requests/cpu","value":"200m"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	restarting, final := waitUpToDateRecording(ctx, t, s, clusterv1beta1.ReasonRollingRestart)
	t.Logf("from the patch to UpToDate: %s; Progressing while it ran: %v", time.Since(applied).Round(time.Millisecond), restarting)
	tr.Stop()
	// status.config names the last server restarted (the meta leader goes
	// last, so it may be any).
	const why = " changes (the nats container), which only a restart applies"
	if c := final.Status.Config; c == nil || c.AppliedBy != clusterv1beta1.AppliedByRestart ||
		!strings.HasPrefix(c.RestartReason, "the pod template of demo-") || !strings.HasSuffix(c.RestartReason, why) {
		t.Errorf("status.config = %+v, want appliedBy Restart and restartReason the pod template of demo-<i>%s", c, why)
	}
	// Highest ordinal first, the meta leader last (CI saw demo-2 lead and
	// go last).
	if order := tr.RestartOrder(); !slices.Equal(order, want) {
		t.Errorf("restart order %v, want %v (meta leader %s last)", order, want, before.Status.JetStream.MetaLeader)
	}
	for pod, uids := range tr.UIDs() {
		if len(uids) != 2 {
			t.Errorf("pod %s had UIDs %v, want 2 (restarted exactly once)", pod, uids)
		}
	}
	for _, o := range tr.Observations() {
		if len(o.Silent) > 1 {
			t.Errorf("at %s, %v were silent at once", o.At.Format(time.RFC3339Nano), o.Silent)
		}
	}
	checkPodTemplate(ctx, t, s, "200m")
	verifyNoLoss(ctx, t, s, pub)
	checkControllerMetrics(t, s)
}

// checkPodTemplate checks every server's pod runs the podTemplate, with the
// nats container's cpu request cpu.
func checkPodTemplate(ctx context.Context, t *testing.T, s *framework.Stack, cpu string) {
	t.Helper()
	for _, name := range serverPods {
		pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec := pod.Spec
		if pod.Labels["team"] != "messaging" || spec.NodeSelector["kubernetes.io/hostname"] != "localnode" ||
			!slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == "dedicated" }) {
			t.Errorf("%s labels %v nodeSelector %v tolerations %v", name, pod.Labels, spec.NodeSelector, spec.Tolerations)
		}
		var names []string
		for _, c := range spec.Containers {
			names = append(names, c.Name)
			if c.Name != "nats" {
				continue
			}
			if q := c.Resources.Requests[corev1.ResourceCPU]; q.String() != cpu {
				t.Errorf("%s nats cpu request %s, want %s", name, q.String(), cpu)
			}
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "TEAM" && e.Value == "messaging" }) {
				t.Errorf("%s nats env %v, want TEAM", name, c.Env)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"metrics", "nats", "sidecar"}) {
			t.Errorf("%s containers %v, want nats, metrics, sidecar", name, names)
		}
		running := 0
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.State.Running != nil {
				running++
			}
		}
		if running != 3 {
			t.Errorf("%s: %d of 3 containers running: %+v", name, running, pod.Status.ContainerStatuses)
		}
	}
}

// checkExporters scrapes every server's exporter on its pod's address.
func checkExporters(ctx context.Context, t *testing.T, s *framework.Stack) {
	t.Helper()
	for _, name := range serverPods {
		pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		url := fmt.Sprintf("http://%s:%d/metrics", pod.Status.PodIP, render.MetricsPort)
		server := strings.TrimSuffix(name, "-0")
		poll.Eventually(t, time.Minute, 500*time.Millisecond, "the exporter of "+server, func() error {
			_, body, err := framework.Get(url)
			if err != nil {
				return err
			}
			conns, ok1 := framework.SumMetric(body, "gnatsd_varz_connections", `server_id="`+server+`"`)
			streams, ok2 := framework.SumMetric(body, "jetstream_server_total_streams", `server_name="`+server+`"`)
			// jetstream_server_max_storage is from /jsz: /varz's
			// jetstream.config can stay empty on a server whose first
			// /varz came before its JetStream was up (seen in CI).
			store, ok3 := framework.SumMetric(body, "jetstream_server_max_storage", `server_name="`+server+`"`)
			if !ok1 || !ok2 || !ok3 || streams < 1 || store <= 0 {
				return fmt.Errorf("%s: connections %v (%v), streams %v (%v), max storage %v (%v)", url, conns, ok1, streams, ok2, store, ok3)
			}
			t.Logf("%s: gnatsd_varz_connections %v, jetstream_server_total_streams %v, jetstream_server_max_storage %v", url, conns, streams, store)
			return nil
		})
	}
}

// checkNetworkPolicy checks the NetworkPolicy follows spec.networkPolicy:
// the default rules, metricsFrom, and its removal when turned off. The
// local node does not enforce NetworkPolicies: this checks the objects.
func checkNetworkPolicy(ctx context.Context, t *testing.T, s *framework.Stack) {
	t.Helper()
	from := func(np *networkingv1.NetworkPolicy, port string) (string, bool) {
		for _, r := range np.Spec.Ingress {
			if r.Ports[0].Port.String() != port {
				continue
			}
			var peers []string
			for _, p := range r.From {
				var sel []string
				if p.NamespaceSelector != nil {
					sel = append(sel, "namespace "+p.NamespaceSelector.MatchLabels[render.NamespaceNameLabel])
				}
				if p.PodSelector != nil {
					sel = append(sel, "pods "+fmt.Sprint(p.PodSelector.MatchLabels))
				}
				peers = append(peers, strings.Join(sel, " and "))
			}
			return strings.Join(peers, ","), true
		}
		return "", false
	}
	waitPolicy := func(what string, ok func(np *networkingv1.NetworkPolicy) error) {
		poll.Eventually(t, time.Minute, 250*time.Millisecond, what, func() error {
			np, err := s.Kube.NetworkingV1().NetworkPolicies(s.NS).Get(ctx, "demo", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				np, err = nil, nil
			}
			if err != nil {
				return err
			}
			return ok(np)
		})
	}
	waitPolicy("the default NetworkPolicy", func(np *networkingv1.NetworkPolicy) error {
		if np == nil {
			return fmt.Errorf("no NetworkPolicy")
		}
		client, _ := from(np, "client")
		cluster, _ := from(np, "cluster")
		monitor, _ := from(np, "monitor")
		metrics, ok := from(np, "metrics")
		if client != "namespace "+s.NS || cluster != "pods map[cluster.nats-operator.io/cluster:demo]" ||
			monitor != "namespace nats-system and pods map[app.kubernetes.io/name:nats-operator]" || ok {
			return fmt.Errorf("client from %q, cluster from %q, monitor from %q, metrics from %q (a rule: %v)", client, cluster, monitor, metrics, ok)
		}
		return nil
	})
	patchCluster(ctx, t, s, `{"spec":{"networkPolicy":{"metricsFrom":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]}}}`)
	waitPolicy("metricsFrom in the NetworkPolicy", func(np *networkingv1.NetworkPolicy) error {
		if m, _ := from(np, "metrics"); m != "namespace monitoring" {
			return fmt.Errorf("metrics from %q", m)
		}
		return nil
	})
	patchCluster(ctx, t, s, `{"spec":{"networkPolicy":{"enabled":false}}}`)
	waitPolicy("the NetworkPolicy deleted", func(np *networkingv1.NetworkPolicy) error {
		if np != nil {
			return fmt.Errorf("still there: %+v", np.Spec)
		}
		return nil
	})
	patchCluster(ctx, t, s, `{"spec":{"networkPolicy":{"enabled":true,"metricsFrom":null}}}`)
	waitPolicy("the NetworkPolicy back", func(np *networkingv1.NetworkPolicy) error {
		if np == nil {
			return fmt.Errorf("no NetworkPolicy")
		}
		return nil
	})
}

var podMonitorCRD = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// checkPodMonitor checks there is no PodMonitor without its CRD, then
// installs prometheus-operator's PodMonitor CRD (its names and version, a
// schema that keeps any field: the controller writes it, nothing here
// reads it) and waits for the PodMonitor.
func checkPodMonitor(ctx context.Context, t *testing.T, s *framework.Stack) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(s.Env.Config)
	pm := schema.GroupVersionResource{Group: render.PodMonitorGroup, Version: render.PodMonitorVersion, Resource: render.PodMonitorResource}
	if _, err := dyn.Resource(pm).Namespace(s.NS).Get(ctx, "demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a PodMonitor without its CRD: %v", err)
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "podmonitors.monitoring.coreos.com"},
		"spec": map[string]any{
			"group": "monitoring.coreos.com", "scope": "Namespaced",
			"names": map[string]any{"kind": "PodMonitor", "listKind": "PodMonitorList", "plural": "podmonitors", "singular": "podmonitor"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	if _, err := dyn.Resource(podMonitorCRD).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// The controller asks discovery again after a minute.
	poll.Eventually(t, 3*time.Minute, time.Second, "the PodMonitor", func() error {
		u, err := dyn.Resource(pm).Namespace(s.NS).Get(ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		port, _, _ := unstructured.NestedSlice(u.Object, "spec", "podMetricsEndpoints")
		if len(port) != 1 || port[0].(map[string]any)["port"] != "metrics" {
			return fmt.Errorf("endpoints %v", port)
		}
		return nil
	})
	t.Logf("PodMonitor created %s after its CRD", time.Since(start).Round(time.Second))
}

// checkControllerMetrics reads the controller's rollout metrics after the
// rollout of three restarts.
func checkControllerMetrics(t *testing.T, s *framework.Stack) {
	t.Helper()
	c := s.Controller
	steps, _ := c.Metric("nats_operator_step_duration_seconds_count", `kind="RestartOne"`)
	stepSum, _ := c.Metric("nats_operator_step_duration_seconds_sum", `kind="RestartOne"`)
	gates, _ := c.Metric("nats_operator_gate_to_step_seconds_count", `kind="RestartOne"`)
	gateSum, _ := c.Metric("nats_operator_gate_to_step_seconds_sum", `kind="RestartOne"`)
	pending, ok := c.Metric("nats_operator_servers_pending", `name="demo"`)
	t.Logf("controller metrics: step_duration count %v sum %.3fs; gate_to_step count %v sum %.3fs; servers_pending %v (%v)",
		steps, stepSum, gates, gateSum, pending, ok)
	if steps < 3 || stepSum <= 0 {
		t.Errorf("step duration count %v sum %v, want at least the 3 restarts", steps, stepSum)
	}
	if gates < 2 || gateSum <= 0 || gateSum/gates > 30 {
		t.Errorf("gate to step count %v sum %v, want at least 2 steps after a wait, each within 30 s", gates, gateSum)
	}
	if !ok || pending != 0 {
		t.Errorf("servers pending %v (%v), want 0 after the rollout", pending, ok)
	}
}
