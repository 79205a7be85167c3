package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nats-operator/nats-operator/internal/poll"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// ProbeImage is the image of the client pods (cmd/natsprobe), which
// hack/realnode.sh builds and imports.
const ProbeImage = "nats-operator.test/natsprobe:dev"

var (
	kube     kubernetes.Interface
	natsAPI  versioned.Interface
	repoRoot string
	nodeDir  string
)

func TestMain(m *testing.M) {
	nodeDir = os.Getenv("REALNODE_DIR")
	if nodeDir == "" || os.Getenv("KUBECONFIG") == "" {
		fmt.Fprintln(os.Stderr, "test/realnode runs on the real node that hack/realnode.sh starts:\n\thack/realnode.sh go test ./test/realnode -v -count=1")
		os.Exit(1)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err == nil {
		kube, err = kubernetes.NewForConfig(cfg)
	}
	if err == nil {
		natsAPI, err = versioned.NewForConfig(cfg)
	}
	if err == nil {
		repoRoot, err = testenv.RepoRoot()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// kubectl runs kubectl (the node's, on PATH) and fails t when it fails.
func kubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command("kubectl", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kubectlIn runs kubectl with stdin.
func kubectlIn(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("kubectl", args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func createNamespace(ctx context.Context, t testing.TB, name string) {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func cluster(ctx context.Context, ns, name string) (*clusterv1beta1.NatsCluster, error) {
	return natsAPI.ClusterV1beta1().NatsClusters(ns).Get(ctx, name, metav1.GetOptions{})
}

// waitSettled waits until the cluster is Ready, Settled and UpToDate and
// returns it with how long that took.
func waitSettled(ctx context.Context, t testing.TB, ns, name string, timeout time.Duration) (*clusterv1beta1.NatsCluster, time.Duration) {
	t.Helper()
	var last *clusterv1beta1.NatsCluster
	took := poll.Eventually(t, timeout, 500*time.Millisecond, "NatsCluster "+name+" Ready, Settled and UpToDate", func() error {
		nc, err := cluster(ctx, ns, name)
		if err != nil {
			return err
		}
		last = nc
		return framework.CheckSettledUpToDate(nc)
	})
	return last, took
}

func patchCluster(ctx context.Context, t testing.TB, ns, name, patch string) {
	t.Helper()
	if _, err := natsAPI.ClusterV1beta1().NatsClusters(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching NatsCluster %s with %s: %v", name, patch, err)
	}
}

// probeResult is what natsprobe answers.
type probeResult struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Error  string `json:"error"`
}

// probe is a client pod running natsprobe in a namespace.
type probe struct {
	ns, name, ip string
}

// startProbe runs a natsprobe pod in ns (labels added) and waits until it
// is Ready.
func startProbe(ctx context.Context, t testing.TB, ns, name string, labels map[string]string) *probe {
	t.Helper()
	uid := int64(65532)
	no, yes := false, true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: ProbeImage, ImagePullPolicy: corev1.PullNever,
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/healthz", Port: intOrString(8080)}}, PeriodSeconds: 1},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p := &probe{ns: ns, name: name}
	poll.Eventually(t, 2*time.Minute, 250*time.Millisecond, "probe pod "+ns+"/"+name+" Ready", func() error {
		got, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && got.Status.PodIP != "" {
				p.ip = got.Status.PodIP
				return nil
			}
		}
		return fmt.Errorf("phase %s, conditions %+v", got.Status.Phase, got.Status.Conditions)
	})
	return p
}

// get asks the probe pod to try a connection (path /nats or /http).
func (p *probe) get(t testing.TB, path, key, value string) probeResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:8080%s", p.ip, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	q := req.URL.Query()
	q.Set(key, value)
	req.URL.RawQuery = q.Encode()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("asking probe %s/%s: %v", p.ns, p.name, err)
	}
	defer resp.Body.Close()
	var r probeResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("probe %s/%s answered: %v", p.ns, p.name, err)
	}
	return r
}

// nats dials a NATS client port from the probe pod.
func (p *probe) nats(t testing.TB, addr string) probeResult { return p.get(t, "/nats", "addr", addr) }

// http GETs url from the probe pod.
func (p *probe) http(t testing.TB, url string) probeResult { return p.get(t, "/http", "url", url) }

// keptLogs writes every pod's log and the cluster's status into the
// stack's directory when t failed (hack/realnode.sh keeps it).
func keptLogs(ctx context.Context, t testing.TB, namespaces ...string) {
	if !t.Failed() {
		return
	}
	dir := filepath.Join(nodeDir, "logs", "pods")
	_ = os.MkdirAll(dir, 0o755)
	for _, ns := range namespaces {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			for _, c := range p.Spec.Containers {
				for _, previous := range []bool{false, true} {
					raw, err := kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, Previous: previous}).DoRaw(ctx)
					if err != nil {
						continue
					}
					suffix := ""
					if previous {
						suffix = ".previous"
					}
					_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s_%s_%s%s.log", ns, p.Name, c.Name, suffix)), raw, 0o644)
				}
			}
		}
		var buf bytes.Buffer
		cmd := exec.Command("kubectl", "get", "-n", ns, "natsclusters,pods,events,networkpolicies,jobs", "-o", "yaml")
		cmd.Stdout, cmd.Stderr = &buf, &buf
		_ = cmd.Run()
		_ = os.WriteFile(filepath.Join(dir, ns+".yaml"), buf.Bytes(), 0o644)
	}
	t.Logf("pod logs and objects kept in %s", dir)
}
