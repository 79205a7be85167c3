package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/test/localnode"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// Stack is the whole local stack: control plane with kube-controller-manager,
// a local node running pods as nats-server processes, and the controller.
type Stack struct {
	// NS is the test's namespace: its own on the package stack (Shared,
	// OwnController), "nats" on a stack of its own (StartStack).
	NS         string
	Env        *testenv.Env
	Node       *localnode.Node
	Controller *Controller
	Kube       kubernetes.Interface
	Nats       versioned.Interface
}

// StartStack starts the stack for one test, the controller with
// controllerArgs added to its command line; t.Cleanup stops it all.
func StartStack(ctx context.Context, t testing.TB, controllerArgs ...string) *Stack {
	t.Helper()
	return StartStackWithNode(ctx, t, localnode.Options{}, controllerArgs...)
}

// StartStackWithNode is StartStack with options for the local node (its
// Root is set here).
func StartStackWithNode(ctx context.Context, t testing.TB, nodeOpts localnode.Options, controllerArgs ...string) *Stack {
	t.Helper()
	s := StartStackWithoutController(ctx, t, nodeOpts)
	s.Controller = StartController(ctx, t, s.Env, controllerArgs...)
	return s
}

// StartStackWithoutController starts the control plane and the local node
// only: the test installs the controller itself (s.Controller is nil).
func StartStackWithoutController(ctx context.Context, t testing.TB, nodeOpts localnode.Options) *Stack {
	t.Helper()
	env := testenv.Start(t, testenv.Options{ControllerManager: true})
	root := KeptDir(t, "node")
	nodeOpts.Root = root
	node, err := localnode.New(env.Config, nodeOpts)
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(context.WithoutCancel(ctx)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		node.Stop()
		if t.Failed() {
			t.Logf("pod logs: %s", filepath.Join(root, "logs"))
		}
	})
	s := newStack(env, node)
	s.NS = "nats"
	return s
}

// CreateNamespace creates a namespace that enforces the restricted Pod
// Security Standard, so every pod the controller renders is admitted only if
// it meets it.
func (s *Stack) CreateNamespace(ctx context.Context, t testing.TB, name string) {
	t.Helper()
	_, err := s.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// ApplyExample applies manifests/examples/<file> to namespace, letting
// mutate change each object first (e.g. the version).
func (s *Stack) ApplyExample(ctx context.Context, t testing.TB, namespace, file string, mutate func(*unstructured.Unstructured)) {
	t.Helper()
	objs := exampleObjects(t, file)
	for _, o := range objs {
		if mutate != nil {
			mutate(o)
		}
	}
	s.ApplyObjects(ctx, t, namespace, objs...)
}

func exampleObjects(t testing.TB, file string) []*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := testenv.ReadManifests(filepath.Join(root, "manifests", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// Cluster gets a NatsCluster.
func (s *Stack) Cluster(ctx context.Context, namespace, name string) (*clusterv1beta1.NatsCluster, error) {
	return s.Nats.ClusterV1beta1().NatsClusters(namespace).Get(ctx, name, metav1.GetOptions{})
}

// CheckCondition returns nil when a condition has the status and reason for
// the cluster's current generation, and otherwise an error describing it.
func CheckCondition(nc *clusterv1beta1.NatsCluster, typ string, status metav1.ConditionStatus, reason string) error {
	c := meta.FindStatusCondition(nc.Status.Conditions, typ)
	if c == nil {
		return fmt.Errorf("%s not set", typ)
	}
	if c.Status != status || c.Reason != reason || c.ObservedGeneration != nc.Generation {
		return fmt.Errorf("%s=%s %s (gen %d/%d): %s", typ, c.Status, c.Reason, c.ObservedGeneration, nc.Generation, c.Message)
	}
	return nil
}

// Conditions describes every condition in one line.
func Conditions(nc *clusterv1beta1.NatsCluster) string {
	s := ""
	for _, c := range nc.Status.Conditions {
		s += fmt.Sprintf("[%s=%s %s: %s] ", c.Type, c.Status, c.Reason, c.Message)
	}
	return s
}

// WaitSettledUpToDate waits until the cluster is Ready (all servers),
// Settled and Progressing=False UpToDate for its current generation.
func (s *Stack) WaitSettledUpToDate(ctx context.Context, t testing.TB, namespace, name string, timeout time.Duration) *clusterv1beta1.NatsCluster {
	t.Helper()
	var last *clusterv1beta1.NatsCluster
	poll.Eventually(t, timeout, 250*time.Millisecond, "Ready, Settled and UpToDate", func() error {
		nc, err := s.Cluster(ctx, namespace, name)
		if err != nil {
			return err
		}
		last = nc
		return CheckSettledUpToDate(nc)
	})
	return last
}

// CheckSettledUpToDate returns nil when the cluster is Ready (all servers),
// Settled and Progressing=False UpToDate for its current generation, and
// otherwise an error saying what is not.
func CheckSettledUpToDate(nc *clusterv1beta1.NatsCluster) error {
	for _, c := range []struct {
		typ, reason string
		status      metav1.ConditionStatus
	}{
		{clusterv1beta1.ConditionReady, clusterv1beta1.ReasonAllServersReady, metav1.ConditionTrue},
		{clusterv1beta1.ConditionSettled, clusterv1beta1.ReasonAllGroupsCurrent, metav1.ConditionTrue},
		{clusterv1beta1.ConditionProgressing, clusterv1beta1.ReasonUpToDate, metav1.ConditionFalse},
	} {
		if err := CheckCondition(nc, c.typ, c.status, c.reason); err != nil {
			return fmt.Errorf("%w | %s", err, Conditions(nc))
		}
	}
	return nil
}

// Events returns the Events of reason about the named object.
func (s *Stack) Events(ctx context.Context, namespace, object, reason string) ([]corev1.Event, error) {
	list, err := s.Kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object + ",reason=" + reason})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// PodUIDs returns the UID of each server's pod (empty when absent).
func (s *Stack) PodUIDs(ctx context.Context, namespace string, pods ...string) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		pod, err := s.Kube.CoreV1().Pods(namespace).Get(ctx, p, metav1.GetOptions{})
		if err == nil {
			out[p] = string(pod.UID)
		}
	}
	return out
}

// ExampleObject returns the first object of a kind in manifests/examples/<file>.
func ExampleObject(file, kind string) (*unstructured.Unstructured, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	objs, err := testenv.ReadManifests(filepath.Join(root, "manifests", "examples", file))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetKind() == kind {
			return o, nil
		}
	}
	return nil, fmt.Errorf("no %s in %s", kind, file)
}

// ApplyExampleFiltered applies the objects of manifests/examples/<file> that
// keep accepts.
func (s *Stack) ApplyExampleFiltered(ctx context.Context, t testing.TB, namespace, file string, keep func(*unstructured.Unstructured) bool) {
	t.Helper()
	var kept []*unstructured.Unstructured
	for _, o := range exampleObjects(t, file) {
		if keep(o) {
			kept = append(kept, o)
		}
	}
	s.ApplyObjects(ctx, t, namespace, kept...)
}

// ApplyObjects server-side applies objects, failing the test on error. A
// NatsCluster that sets no spec.lameDuck gets the test clusters' grace
// period (TestLameDuckGracePeriod).
func (s *Stack) ApplyObjects(ctx context.Context, t testing.TB, namespace string, objs ...*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		withTestLameDuck(o)
	}
	if err := ApplyObjects(ctx, s.Env.Config, namespace, objs...); err != nil {
		t.Fatal(err)
	}
}

// ServerRevisions returns the config revision each server's ConfigMap holds
// (the nats.conf server_metadata.config_revision), by server name: the
// revision a server running its config reports.
func (s *Stack) ServerRevisions(ctx context.Context, t testing.TB, nc *clusterv1beta1.NatsCluster) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := range nc.Spec.Replicas {
		cm, err := s.Kube.CoreV1().ConfigMaps(nc.Namespace).Get(ctx, render.ConfigMapName(nc.Name, i), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading the ConfigMap of %s: %v", render.ServerName(nc.Name, i), err)
		}
		rc, err := render.ReadConfig([]byte(cm.Data[render.ConfigKey]), nc.Spec.Version)
		if err != nil {
			t.Fatalf("reading the config of %s: %v", render.ServerName(nc.Name, i), err)
		}
		out[render.ServerName(nc.Name, i)] = rc.Revision
	}
	return out
}
