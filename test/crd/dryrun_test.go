package crd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// dryRun creates nothing: the API server validates, admits and answers as if.
var dryRunCreate = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}

// TestEverySpecTheCRDAcceptsRendersObjectsTheAPIServerAccepts is the
// property "accepted by the CRD means it runs": it generates NatsClusters
// (every optional field absent or present, boundary values, the examples),
// submits each to the real API server with server-side dry-run, and for each
// one accepted renders it and submits every rendered object the same way,
// plus the pod and claims the StatefulSet controller would make from each
// StatefulSet (whose names and labels have limits of their own). Every
// object must be accepted, or the spec must have been refused at apply.
//
// A field added to the API must be added to genSpec.
func TestEverySpecTheCRDAcceptsRendersObjectsTheAPIServerAccepts(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "dryrun")
	dyn := dynamic.NewForConfigOrDie(env.Config).Resource(natsClusters).Namespace(ns)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	trust := rendertest.NewTrust(t, rendertest.WithAccounts("app", "ops", "demo-app")).Trust()
	// Pods are admitted only with their service account present (there is
	// no service account controller in this control plane).
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	specs := examples(t)
	rng := rand.New(rand.NewPCG(39, 12))
	for i := range 600 {
		specs = append(specs, genSpec(rng, i))
	}

	var (
		mu                          sync.Mutex
		accepted, refused, rendered int
		held                        int
		failures                    []string
	)
	work := make(chan map[string]any)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for obj := range work {
				u := &unstructured.Unstructured{Object: obj}
				created, err := dyn.Create(ctx, u, dryRunCreate)
				if err != nil {
					mu.Lock()
					refused++
					mu.Unlock()
					continue
				}
				objs, err := renderedObjects(created, trust)
				n := 0
				var bad []string
				var se *render.SpecError
				if errors.As(err, &se) {
					// Held with InvalidSpec before anything is written.
					mu.Lock()
					held++
					mu.Unlock()
					continue
				}
				if err != nil {
					bad = append(bad, fmt.Sprintf("NatsCluster %s accepted by the CRD, but rendering failed: %v", created.GetName(), err))
				}
				for _, o := range objs {
					n++
					if err := submit(ctx, kube, ns, o); err != nil {
						bad = append(bad, fmt.Sprintf("NatsCluster %s (spec %s): %T %s refused: %v", created.GetName(), compact(obj["spec"]), o, objectName(o), err))
						break // one failure per spec is enough to read
					}
				}
				mu.Lock()
				accepted++
				rendered += n
				failures = append(failures, bad...)
				mu.Unlock()
			}
		})
	}
	for _, s := range specs {
		work <- s
	}
	close(work)
	wg.Wait()

	t.Logf("%d specs generated: %d refused by the CRD at apply, %d held by the renderer with InvalidSpec, %d rendered; %d rendered objects (and the pods and claims of their StatefulSets) submitted with dry-run, %d refused",
		len(specs), refused, held, accepted, rendered, len(failures))
	for i, f := range failures {
		if i == 20 {
			t.Errorf("... and %d more", len(failures)-20)
			break
		}
		t.Error(f)
	}
	if accepted < len(specs)/2 {
		t.Errorf("only %d of %d generated specs were accepted: the generator tests the CRD more than the renderer", accepted, len(specs))
	}
}

// examples are the NatsClusters of manifests/examples.
func examples(t *testing.T) []map[string]any {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	files, err := filepath.Glob(filepath.Join(root, "manifests", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		objs, err := testenv.ReadManifests(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() == "NatsCluster" {
				out = append(out, o.Object)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no NatsCluster in manifests/examples")
	}
	return out
}

// renderedObjects renders a NatsCluster as the API server returned it
// (defaults filled in) into every object the controller would write.
func renderedObjects(u *unstructured.Unstructured, trust *render.Trust) ([]runtime.Object, error) {
	nc := &clusterv1beta1.NatsCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, nc); err != nil {
		return nil, err
	}
	nc.UID = "0c2f9a86-0000-4000-8000-000000000001"
	in := render.Input{Cluster: nc}
	if nc.Spec.Auth != nil {
		in.Trust = trust
	}
	// TLS as the controller resolves it once the Secrets exist: routes on
	// their generated Secret or spec.routes.tls.secret, clients on
	// spec.tls.secret or the Certificate's Secret.
	tlsFiles := func(name string, ref *clusterv1beta1.TLSSecretRef) *render.TLSFiles {
		f := &render.TLSFiles{Secret: name, CertKey: "tls.crt", KeyKey: "tls.key", CAKey: "ca.crt", Digest: "0123456789", Verify: true}
		if ref != nil {
			f.Secret, f.CertKey, f.KeyKey, f.CAKey = ref.Name, ref.CertKey, ref.KeyKey, ref.CAKey
		}
		return f
	}
	if rt := nc.Spec.Routes.TLS; rt == nil || rt.Mode != clusterv1beta1.RouteTLSDisabled {
		var ref *clusterv1beta1.TLSSecretRef
		if rt != nil {
			ref = rt.Secret
		}
		in.TLS.Routes = tlsFiles(nc.Name+"-routes-tls", ref)
	}
	if ct := nc.Spec.TLS; ct != nil {
		in.TLS.Client = tlsFiles(nc.Name+"-client-tls", ct.Secret)
	}
	if r := in.TLS.Routes; r != nil && nc.Spec.Gateway.TLSOn() {
		gw := *r
		gw.CASecret, gw.CAKey, gw.CADigest = nc.Name+"-gateway-ca", "ca.crt", "9876543210"
		in.TLS.Gateway = &gw
	}
	out, err := render.Render(in)
	if err != nil {
		return nil, err
	}
	objs := []runtime.Object{out.ClientService, out.HeadlessService, out.PDB}
	if out.NetworkPolicy != nil {
		objs = append(objs, out.NetworkPolicy)
	}
	// Servers differ only in their ordinal: beyond 5, the first two and the
	// last two (the longest names) stand for the rest.
	servers := out.Servers
	if n := len(servers); n > 5 {
		servers = append(servers[:2:2], servers[n-2:]...)
	}
	for _, s := range servers {
		objs = append(objs, s.ConfigMap, s.StatefulSet)
		pod, claims := statefulSetPod(s.StatefulSet)
		objs = append(objs, pod)
		for i := range claims {
			objs = append(objs, &claims[i])
		}
	}
	return objs, nil
}

// statefulSetPod is the pod (and claims) the StatefulSet controller creates
// for the only replica of sts, as kubernetes pkg/controller/statefulset
// names and labels them, with the longest revision hash it can make (10
// characters).
func statefulSetPod(sts *appsv1.StatefulSet) (*corev1.Pod, []corev1.PersistentVolumeClaim) {
	podName := sts.Name + "-0"
	pod := &corev1.Pod{
		ObjectMeta: *sts.Spec.Template.ObjectMeta.DeepCopy(),
		Spec:       *sts.Spec.Template.Spec.DeepCopy(),
	}
	pod.Name, pod.Namespace = podName, sts.Namespace
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetPodNameLabel] = podName
	pod.Labels[appsv1.PodIndexLabel] = "0"
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = sts.Name + "-" + "7b9c8d6f5z"
	pod.Spec.Hostname = podName
	pod.Spec.Subdomain = sts.Spec.ServiceName
	var claims []corev1.PersistentVolumeClaim
	for _, tmpl := range sts.Spec.VolumeClaimTemplates {
		c := corev1.PersistentVolumeClaim{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
		c.Name = tmpl.Name + "-" + podName
		c.Namespace = sts.Namespace
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		for k, v := range sts.Spec.Selector.MatchLabels {
			c.Labels[k] = v
		}
		claims = append(claims, c)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: tmpl.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name},
		}})
	}
	return pod, claims
}

// submit creates obj in namespace ns with server-side dry-run.
func submit(ctx context.Context, kube kubernetes.Interface, ns string, obj runtime.Object) error {
	var err error
	switch o := obj.(type) {
	case *corev1.Service:
		o = o.DeepCopy()
		o.Namespace = ns
		_, err = kube.CoreV1().Services(ns).Create(ctx, o, dryRunCreate)
	case *corev1.ConfigMap:
		o = o.DeepCopy()
		o.Namespace = ns
		_, err = kube.CoreV1().ConfigMaps(ns).Create(ctx, o, dryRunCreate)
	case *appsv1.StatefulSet:
		o = o.DeepCopy()
		o.Namespace = ns
		_, err = kube.AppsV1().StatefulSets(ns).Create(ctx, o, dryRunCreate)
	case *corev1.Pod:
		o = o.DeepCopy()
		o.Namespace = ns
		_, err = kube.CoreV1().Pods(ns).Create(ctx, o, dryRunCreate)
	case *corev1.PersistentVolumeClaim:
		o = o.DeepCopy()
		o.Namespace = ns
		_, err = kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, o, dryRunCreate)
	case *policyv1.PodDisruptionBudget:
		o = o.DeepCopy()
		o.Namespace = ns
		_, err = kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, o, dryRunCreate)
	case *networkingv1.NetworkPolicy:
		o = o.DeepCopy()
		o.Namespace = ns
		_, err = kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, o, dryRunCreate)
	default:
		err = fmt.Errorf("submit: no client for %T", obj)
	}
	return err
}

func objectName(obj runtime.Object) string {
	if o, ok := obj.(metav1.Object); ok {
		return o.GetName()
	}
	return "?"
}

func compact(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 400 {
		return string(b[:400]) + "..."
	}
	return string(b)
}

// genSpec makes the i-th generated NatsCluster: each optional field absent
// or present, with values that include the boundaries.
func genSpec(rng *rand.Rand, i int) map[string]any {
	pick := func(xs ...any) any { return xs[rng.IntN(len(xs))] }
	maybe := func() bool { return rng.IntN(2) == 0 }
	spec := map[string]any{
		"version":  pick("2.15.2", "2.15.1", "2.10.24", "2.11.0", "2.16.0-rc.1", "3.0.0"),
		"replicas": pick(int64(1), int64(2), int64(3), int64(5), int64(7), int64(50), int64(98), int64(99), int64(rng.IntN(99)+1)),
	}
	if maybe() {
		img := map[string]any{}
		if maybe() {
			img["repository"] = pick("nats", "docker.io/library/nats", "registry.example.com:5000/team/nats-server", "ghcr.io/nats-io/nats")
		}
		if maybe() {
			img["digest"] = "sha256:" + strings.Repeat("0123456789abcdef", 4)
		}
		spec["image"] = img
	}
	if maybe() {
		spec["resources"] = genResources(rng, pick, maybe, "cpu", "memory", "ephemeral-storage")
	}
	if maybe() {
		js := map[string]any{}
		if maybe() {
			js["domain"] = pick("", "hub", "leaf_1", "A-b_C")
		}
		if maybe() {
			lim := map[string]any{}
			if maybe() {
				lim["maxMemoryStore"] = pick("0", "512Mi", int64(1073741824), "1.5Gi")
			}
			if maybe() {
				lim["maxFileStore"] = pick("0", "10Gi", int64(1), "1Ti")
			}
			js["limits"] = lim
		}
		if maybe() {
			js["volumeClaimTemplate"] = genClaim(rng, pick, maybe)
		}
		spec["jetstream"] = js
	}
	if maybe() {
		tags := map[string]any{}
		for range rng.IntN(4) {
			tags[pick("region", "zone", "az", "k").(string)] = pick("eu", "us-east-1", "", "a:b")
		}
		spec["serverTags"] = tags
	}
	if maybe() {
		auth := map[string]any{"trustRef": map[string]any{"name": "demo"}}
		if maybe() {
			ref := map[string]any{"name": "demo-system-creds"}
			if maybe() {
				ref["key"] = pick("user.creds", "sys.creds")
			}
			auth["systemCredentials"] = map[string]any{"secretKeyRef": ref}
		}
		if maybe() {
			auth["resolver"] = pick("Full", "Cache")
		}
		if maybe() {
			refs := []any{}
			for _, n := range []string{"app", "ops"}[:rng.IntN(3)] {
				refs = append(refs, map[string]any{"name": n})
			}
			auth["accountTrustRefs"] = refs
		}
		spec["auth"] = auth
	}
	if maybe() {
		spec["rollout"] = map[string]any{"paused": maybe()}
	}
	if maybe() {
		spec["podTemplate"] = genPodTemplate(rng, pick, maybe, spec["resources"] != nil)
	}
	if maybe() {
		m := map[string]any{"enabled": maybe()}
		if maybe() {
			m["image"] = pick("natsio/prometheus-nats-exporter:0.17.3", "registry.example.com:5000/exporter@sha256:"+strings.Repeat("ab", 32))
		}
		spec["metrics"] = m
	}
	if maybe() {
		np := map[string]any{"enabled": maybe()}
		if maybe() {
			np["metricsFrom"] = []any{pick(
				map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}},
				map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.0/8"}},
				map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": "prometheus"}}},
			)}
		}
		spec["networkPolicy"] = np
	}
	if ld := genLameDuck(i); ld != nil {
		spec["lameDuck"] = ld
	}
	if gw := genGateway(i); gw != nil {
		spec["gateway"] = gw
	}
	if ln := genLeafNodes(i); ln != nil {
		spec["leafnodes"] = ln
	}
	if maybe() {
		ws := map[string]any{"port": pick(int64(8080), int64(443), int64(65535), int64(1)), "noTLS": true}
		if maybe() {
			ws["allowedOrigins"] = []any{"https://app.example.com", "http://localhost:3000"}
		} else if maybe() {
			ws["sameOrigin"] = true
		}
		if maybe() {
			ws["compression"] = true
		}
		spec["websocket"] = ws
	}
	if spec["jetstream"] != nil && maybe() {
		m := map[string]any{"port": pick(int64(1883), int64(8883), int64(65534)), "noTLS": true}
		if maybe() {
			m["ackWait"] = pick("1s", "30s", "24h")
		}
		if maybe() {
			m["maxAckPending"] = pick(int64(1), int64(1024), int64(65535))
		}
		spec["mqtt"] = m
	}
	return map[string]any{
		"apiVersion": "cluster.nats-operator.io/v1beta1",
		"kind":       "NatsCluster",
		"metadata":   map[string]any{"name": genName(rng, i)},
		"spec":       spec,
	}
}

// genGateway is the i-th spec's gateway (nil for half of the specs),
// from a source of its own like genLameDuck.
func genGateway(i int) map[string]any {
	rng := rand.New(rand.NewPCG(uint64(i), 31))
	if rng.IntN(2) == 0 {
		return nil
	}
	gw := map[string]any{}
	if rng.IntN(2) == 0 {
		gw["name"] = "gw-" + strings.Repeat("x", rng.IntN(58))
	}
	var remotes []any
	for k := range rng.IntN(4) {
		name := fmt.Sprintf("remote-%d", k)
		if rng.IntN(2) == 0 {
			remotes = append(remotes, map[string]any{"name": name, "clusterRef": map[string]any{"name": name, "namespace": "other-" + name}})
		} else {
			remotes = append(remotes, map[string]any{"name": name, "urls": []any{"nats://" + name + ".example.com:7222", "tls://10.0.0.1:7522"}})
		}
	}
	if len(remotes) > 0 {
		gw["remotes"] = remotes
	}
	if rng.IntN(3) == 0 {
		gw["advertise"] = "gateway.example.com:32022"
	}
	if rng.IntN(3) == 0 {
		gw["rejectUnknownCluster"] = true
	}
	if rng.IntN(2) == 0 {
		gw["insecure"] = true
	}
	return gw
}

// genLeafNodes is the i-th spec's leafnodes (nil for half of the specs),
// from a source of its own like genLameDuck.
func genLeafNodes(i int) map[string]any {
	rng := rand.New(rand.NewPCG(uint64(i), 32))
	if rng.IntN(2) == 0 {
		return nil
	}
	ln := map[string]any{"accept": rng.IntN(2) == 0}
	// Accepting leaves needs spec.auth or insecure: most say insecure,
	// some are refused when the spec has no auth.
	if rng.IntN(5) != 0 {
		ln["insecure"] = true
	}
	var remotes []any
	for k := range rng.IntN(3) {
		r := map[string]any{"name": fmt.Sprintf("hub-%d", k)}
		if rng.IntN(2) == 0 {
			r["clusterRef"] = map[string]any{"name": fmt.Sprintf("hub-%d", k)}
		} else {
			r["urls"] = []any{"nats-leaf://hub.example.com:7422", "wss://hub.example.com:443"}
		}
		if rng.IntN(2) == 0 {
			r["credentials"] = map[string]any{"name": fmt.Sprintf("hub-%d-creds", k), "key": "leaf.creds"}
		}
		remotes = append(remotes, r)
	}
	if len(remotes) > 0 {
		ln["remotes"] = remotes
	}
	return ln
}

// genLameDuck is the i-th spec's lameDuck (nil for a third of the specs),
// with values the CRD accepts, its floors among them (the refusals are
// TestBadNatsClustersAreRefusedNamingTheField's): what this test asks is
// that every accepted one renders. It draws from a source of its own, so
// the rest of each generated spec is what it was before the field existed.
func genLameDuck(i int) map[string]any {
	rng := rand.New(rand.NewPCG(uint64(i), 30))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	if rng.IntN(3) == 0 {
		return nil
	}
	ld := map[string]any{}
	if rng.IntN(2) == 0 {
		ld["duration"] = pick("30s", "31s", "1m30s", "10m")
	}
	if rng.IntN(2) == 0 {
		ld["gracePeriod"] = pick("1s", "1.5s", "10s", "29s")
	}
	return ld
}

// genPodTemplate is a podTemplate of the kinds users write: scheduling, the
// nats container's env and resources (only without spec.resources, else
// the CRD refuses it), sidecars with and without a security context, extra
// volumes. (priorityClassName and serviceAccountName are left out: a pod
// naming ones that do not exist is refused at admission, whatever the
// operator does.)
func genPodTemplate(rng *rand.Rand, pick func(...any) any, maybe func() bool, hasResources bool) map[string]any {
	spec := map[string]any{}
	if maybe() {
		spec["nodeSelector"] = map[string]any{pick("kubernetes.io/os", "pool", "example.com/tier").(string): pick("linux", "nats", "")}
	}
	if maybe() {
		spec["tolerations"] = []any{pick(
			map[string]any{"key": "dedicated", "operator": "Equal", "value": "nats", "effect": "NoSchedule"},
			map[string]any{"operator": "Exists"},
			map[string]any{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": int64(30)},
		)}
	}
	if maybe() {
		spec["topologySpreadConstraints"] = []any{map[string]any{"maxSkew": int64(1), "topologyKey": "topology.kubernetes.io/zone",
			"whenUnsatisfiable": pick("DoNotSchedule", "ScheduleAnyway"), "labelSelector": map[string]any{"matchLabels": map[string]any{"app": "x"}}}}
	}
	var containers []any
	if maybe() {
		nats := map[string]any{"name": "nats"}
		if maybe() {
			nats["env"] = []any{map[string]any{"name": "TZ", "value": "UTC"}}
		}
		if !hasResources && maybe() {
			nats["resources"] = genResources(rng, pick, maybe, "cpu", "memory")
		}
		if maybe() {
			nats["readinessProbe"] = map[string]any{"periodSeconds": int64(5), "failureThreshold": int64(6)}
		}
		containers = append(containers, nats)
	}
	if maybe() {
		side := map[string]any{"name": pick("logs", "proxy", "a-very-long-sidecar-name-of-63-characters-for-the-limit-0123456").(string),
			"image": pick("busybox:1.37", "ghcr.io/example/agent@sha256:"+strings.Repeat("cd", 32), "alpine")}
		if maybe() {
			side["securityContext"] = map[string]any{"allowPrivilegeEscalation": false, "capabilities": map[string]any{"drop": []any{"ALL"}}, "readOnlyRootFilesystem": maybe()}
		}
		if maybe() {
			side["volumeMounts"] = []any{map[string]any{"name": "scratch", "mountPath": "/scratch"}}
			spec["volumes"] = []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{"sizeLimit": "64Mi"}}}
		}
		containers = append(containers, side)
	}
	if len(containers) > 0 {
		spec["containers"] = containers
	}
	pt := map[string]any{"spec": spec}
	if maybe() {
		pt["metadata"] = map[string]any{"labels": map[string]any{"team": pick("messaging", "a.b-c_d")}, "annotations": map[string]any{"example.com/owner": "ops"}}
	}
	return pt
}

// genName is a NatsCluster name: short and long (to the limit and past
// it), and a few the API server accepts for a custom resource but not for a
// Service or pod (dots, a leading digit).
func genName(rng *rand.Rand, i int) string {
	base := "c" + strconv.Itoa(i) + "-"
	var n int
	switch rng.IntN(20) {
	case 0:
		n = 1
	case 1:
		n = clusterv1beta1.MaxNameLength
	case 2:
		n = clusterv1beta1.MaxNameLength + 1
	case 3:
		n = 40 + rng.IntN(24)
	case 4:
		return "x" + strconv.Itoa(i) + ".demo"
	case 5:
		return strconv.Itoa(i) + "demo"
	default:
		n = 4 + rng.IntN(12)
	}
	if n <= len(base) {
		return base[:1] + strings.Repeat("a", n-1)
	}
	return base + strings.Repeat("a", n-len(base))
}

func genQuantity(rng *rand.Rand, pick func(...any) any) any {
	if rng.IntN(10) == 0 {
		return pick("-1", "-1Gi", "0")
	}
	return pick("1", "100m", "250m", "2", "64Mi", "1Gi", "4Gi", "1.5G", int64(2), int64(1073741824), "1e3")
}

func genResources(rng *rand.Rand, pick func(...any) any, maybe func() bool, names ...string) map[string]any {
	res := map[string]any{}
	for _, part := range []string{"requests", "limits"} {
		if !maybe() {
			continue
		}
		l := map[string]any{}
		for _, n := range names {
			if maybe() {
				l[n] = genQuantity(rng, pick)
			}
		}
		if rng.IntN(20) == 0 {
			l[pick("nvidia.com/gpu", "hugepages-2Mi", "pods", "foo").(string)] = "1"
		}
		res[part] = l
	}
	if rng.IntN(20) == 0 {
		res["claims"] = []any{map[string]any{"name": "gpu"}}
	}
	return res
}

func genClaim(rng *rand.Rand, pick func(...any) any, maybe func() bool) map[string]any {
	spec := map[string]any{}
	if maybe() {
		spec["accessModes"] = pick(
			[]any{"ReadWriteOnce"}, []any{"ReadWriteOncePod"}, []any{"ReadWriteMany", "ReadOnlyMany"},
			[]any{"ReadWriteOncePod", "ReadWriteOnce"}, []any{}, []any{"Sometimes"})
	}
	if maybe() {
		spec["storageClassName"] = pick("standard", "", "fast-ssd", "Not A Class")
	}
	if maybe() {
		spec["volumeMode"] = pick("Filesystem", "Block", "Other")
	}
	if maybe() {
		spec["resources"] = genResources(rng, pick, maybe, "storage")
	}
	vct := map[string]any{"spec": spec}
	if maybe() {
		md := map[string]any{}
		if maybe() {
			md["labels"] = map[string]any{pick("team", "example.com/owner", "bad key", "-x").(string): pick("nats", "", "a b", strings.Repeat("v", 64)).(string)}
		}
		if maybe() {
			md["annotations"] = map[string]any{pick("backup", "example.com/policy", "bad key").(string): "daily"}
		}
		vct["metadata"] = md
	}
	return vct
}

// TestTheLongestNameWithTheMostServersRendersValidObjects submits every
// object of a NatsCluster with the longest name the CRD allows and 99
// servers, and checks that one character more is refused at apply with the
// limit named.
func TestTheLongestNameWithTheMostServersRendersValidObjects(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "longest")
	dyn := dynamic.NewForConfigOrDie(env.Config).Resource(natsClusters).Namespace(ns)
	kube := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	longest := "n" + strings.Repeat("a", clusterv1beta1.MaxNameLength-1)
	cluster := func(name string) *unstructured.Unstructured {
		u := newCluster(name, set("spec.replicas", int64(99)), remove("spec.auth"), set("spec.leafnodes.insecure", true), set("spec.gateway.insecure", true))
		return u
	}
	created, err := dyn.Create(ctx, cluster(longest), dryRunCreate)
	if err != nil {
		t.Fatalf("the longest name (%d characters) with 99 servers was refused: %v", len(longest), err)
	}
	nc := &clusterv1beta1.NatsCluster{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, nc); err != nil {
		t.Fatal(err)
	}
	nc.UID = "0c2f9a86-0000-4000-8000-000000000002"
	out, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	objs := []runtime.Object{out.ClientService, out.HeadlessService, out.PDB}
	for _, s := range out.Servers {
		pod, claims := statefulSetPod(s.StatefulSet)
		objs = append(objs, s.ConfigMap, s.StatefulSet, pod)
		for i := range claims {
			objs = append(objs, &claims[i])
		}
	}
	for _, o := range objs {
		if err := submit(ctx, kube, ns, o); err != nil {
			t.Errorf("%T %s refused: %v", o, objectName(o), err)
		}
	}
	t.Logf("name of %d characters, 99 servers: %d objects (pods and claims included) accepted by dry-run; longest pod %s-0, revision label %s",
		len(longest), len(objs), out.Servers[98].StatefulSet.Name, out.Servers[98].StatefulSet.Name+"-7b9c8d6f5z")

	_, err = dyn.Create(ctx, cluster(longest+"a"), strictCreate)
	if err == nil {
		t.Fatalf("a name of %d characters was accepted", len(longest)+1)
	}
	if !strings.Contains(err.Error(), "metadata.name must be at most 49 characters") {
		t.Errorf("the refusal does not name the limit: %v", err)
	}
	t.Logf("one character more: %v", err)
}
