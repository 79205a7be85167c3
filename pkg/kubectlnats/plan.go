package kubectlnats

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/controller"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	typedcluster "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned/typed/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// streamFlag is a stream an offline plan takes as present (--stream
// ACCOUNT/NAME, $G for the global account).
type streamFlag struct{ account, name string }

func parseStream(s string) (streamFlag, error) {
	account, name, ok := strings.Cut(s, "/")
	if !ok || account == "" || name == "" {
		return streamFlag{}, fmt.Errorf("--stream %q: want ACCOUNT/NAME, e.g. $G/ORDERS", s)
	}
	return streamFlag{account, name}, nil
}

// planOptions are plan's flags.
type planOptions struct {
	file, from string
	streams    []string
	output     string
	// namespace is -n, or the kubeconfig's; "" offline means "default".
	namespace string
	// namespaceGiven says namespace is -n: a manifest object in another
	// namespace is then an error, not planned in its own.
	namespaceGiven bool
	// config reaches the live cluster; nil offline.
	config *rest.Config
	stdin  io.Reader
}

// ServerPlan is what changes for one server.
type ServerPlan struct {
	Name string `json:"name"`
	// Config and Template are diffs of the server's nats.conf and pod
	// template, running -> target; empty when unchanged.
	Config   string `json:"configDiff,omitempty"`
	Template string `json:"templateDiff,omitempty"`
	// State is new, removed, changed or unchanged.
	State string `json:"state"`
}

// PlanResult is plan's output.
type PlanResult struct {
	Cluster        string       `json:"cluster"`
	Against        string       `json:"against"`
	TargetRevision string       `json:"targetRevision,omitempty"`
	Servers        []ServerPlan `json:"servers,omitempty"`
	Verdict        PlanVerdict  `json:"verdict"`
	// Notes say what plan could not check.
	Notes []string `json:"notes,omitempty"`
}

// runPlan decides and prints; it returns the exit code.
func runPlan(ctx context.Context, o planOptions, stdout, stderr io.Writer) int {
	res, err := plan(ctx, o)
	if err != nil {
		if ie, ok := err.(*invalidError); ok {
			fmt.Fprintf(stderr, "error: invalid manifest: %s\n", ie.msg)
			return ExitInvalid
		}
		fmt.Fprintf(stderr, "error: %v\n", err)
		return ExitError
	}
	switch o.output {
	case "json":
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(b))
	case "yaml":
		b, _ := yaml.Marshal(res)
		fmt.Fprint(stdout, string(b))
	default:
		printPlan(stdout, res)
	}
	return res.Verdict.Exit
}

// plan runs the controller's decide phase on the manifest.
func plan(ctx context.Context, o planOptions) (*PlanResult, error) {
	m, err := readManifest(o.file, o.stdin)
	if err != nil {
		return nil, err
	}
	var streams []streamFlag
	for _, s := range o.streams {
		f, err := parseStream(s)
		if err != nil {
			return nil, err
		}
		streams = append(streams, f)
	}
	res := &PlanResult{}
	var p *controller.Preview
	if o.from != "" {
		p, err = offlinePlan(ctx, o, m, streams, res)
	} else {
		if o.config == nil {
			return nil, fmt.Errorf("no cluster to plan against: give --from old.yaml for an offline plan")
		}
		p, err = livePlan(ctx, o, m, res)
	}
	if err != nil {
		return nil, err
	}
	res.Cluster = m.cluster.Namespace + "/" + m.cluster.Name
	res.TargetRevision = p.Input.TargetRevision
	res.Servers = serverPlans(p)
	res.Verdict = Judge(p.Decision)
	return res, nil
}

// offlinePlan decides against a simulated cluster running --from settled.
func offlinePlan(ctx context.Context, o planOptions, m *manifest, streams []streamFlag, res *PlanResult) (*controller.Preview, error) {
	old, err := readManifest(o.from, o.stdin)
	if err != nil {
		return nil, err
	}
	ns := o.namespace
	if ns == "" {
		ns = "default"
	}
	if o.namespaceGiven {
		if err := old.onlyIn(ns, o.from); err != nil {
			return nil, err
		}
		if err := m.onlyIn(ns, o.file); err != nil {
			return nil, err
		}
	}
	old.inNamespace(ns)
	m.inNamespace(ns)
	if old.cluster.Name != m.cluster.Name || old.cluster.Namespace != m.cluster.Namespace {
		return nil, fmt.Errorf("--from names NatsCluster %s/%s, -f names %s/%s", old.cluster.Namespace, old.cluster.Name, m.cluster.Namespace, m.cluster.Name)
	}
	live, kubeObjs, natsObjs, snap, err := settledCluster(ctx, old, streams)
	if err != nil {
		return nil, err
	}
	// The new file may bring trusts and Secrets the old one had not.
	for _, t := range m.operatorTrusts {
		natsObjs = appendNew(natsObjs, t)
	}
	for _, t := range m.accountTrusts {
		natsObjs = appendNew(natsObjs, t)
	}
	for _, s := range m.secrets {
		kubeObjs = appendNew(kubeObjs, s)
	}
	pv, err := staticPreviewer(slices.Concat(kubeObjs, natsObjs), snap)
	if err != nil {
		return nil, err
	}
	res.Against = "offline: " + o.from + " running and settled (simulated)"
	res.Notes = append(res.Notes, "offline: the API server's validation (CEL rules of the CRD) is not run; plan against a live cluster runs it by a dry-run")
	if len(streams) == 0 {
		res.Notes = append(res.Notes, "offline: no streams are taken as present (give --stream ACCOUNT/NAME)")
	}
	return pv.Decide(ctx, applied(live, m.cluster), metav1.Now())
}

// appendNew appends o unless an object of its kind and name is there.
func appendNew(objs []runtime.Object, o runtime.Object) []runtime.Object {
	om := o.(metav1.Object)
	for _, x := range objs {
		xm := x.(metav1.Object)
		if fmt.Sprintf("%T", x) == fmt.Sprintf("%T", o) && xm.GetNamespace() == om.GetNamespace() && xm.GetName() == om.GetName() {
			return objs
		}
	}
	return append(objs, o)
}

// applied is the live NatsCluster with the manifest applied: its spec, its
// labels and annotations added; status and the controller's marks kept.
func applied(live, file *clusterv1beta1.NatsCluster) *clusterv1beta1.NatsCluster {
	nc := live.DeepCopy()
	nc.Spec = *file.Spec.DeepCopy()
	for k, v := range file.Labels {
		if nc.Labels == nil {
			nc.Labels = map[string]string{}
		}
		nc.Labels[k] = v
	}
	for k, v := range file.Annotations {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[k] = v
	}
	nc.Generation++
	return nc
}

// livePlan decides against the live cluster: its objects, its servers'
// reports (at their pod IPs, as the controller asks them), its status.
func livePlan(ctx context.Context, o planOptions, m *manifest, res *PlanResult) (*controller.Preview, error) {
	ns := o.namespace
	if ns == "" {
		ns = "default"
	}
	if o.namespaceGiven {
		if err := m.onlyIn(ns, o.file); err != nil {
			return nil, err
		}
	}
	m.inNamespace(ns)
	nats, err := versioned.NewForConfig(o.config)
	if err != nil {
		return nil, err
	}
	clusters := nats.ClusterV1beta1().NatsClusters(m.cluster.Namespace)
	var nc *clusterv1beta1.NatsCluster
	// The dry-run update carries the resourceVersion read: the controller
	// writes status every second while a rollout moves, so a conflict is
	// read again and retried rather than reported.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		nc, err = liveApplied(ctx, clusters, m, res)
		return err
	})
	if err != nil {
		return nil, err
	}
	pv, err := livePreviewer(ctx, o.config, ns)
	if err != nil {
		return nil, err
	}
	defer pv.stop()
	return pv.Decide(ctx, nc, metav1.Now())
}

// liveApplied is the live NatsCluster with the manifest applied (or the
// manifest, for one that does not exist yet), checked by the API server's
// own validation with a dry-run; a conflict is returned as it is.
func liveApplied(ctx context.Context, clusters typedcluster.NatsClusterInterface, m *manifest, res *PlanResult) (*clusterv1beta1.NatsCluster, error) {
	live, err := clusters.Get(ctx, m.cluster.Name, metav1.GetOptions{})
	var nc *clusterv1beta1.NatsCluster
	switch {
	case apierrors.IsNotFound(err):
		nc = m.cluster.DeepCopy()
		res.Against = "live: NatsCluster " + m.cluster.Namespace + "/" + m.cluster.Name + " does not exist (it would be created)"
		if _, err := clusters.Create(ctx, nc, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return nil, validationError(err)
		}
		return nc, nil
	case err != nil:
		return nil, fmt.Errorf("reading NatsCluster %s/%s: %w", m.cluster.Namespace, m.cluster.Name, err)
	}
	nc = applied(live, m.cluster)
	res.Against = "live: NatsCluster " + nc.Namespace + "/" + nc.Name + " (generation " + fmt.Sprint(live.Generation) + ")"
	// The API server's own validation (OpenAPI schema, CEL rules).
	if _, err := clusters.Update(ctx, nc, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "kubectl-nats"}); err != nil {
		if apierrors.IsConflict(err) {
			return nil, err
		}
		return nil, validationError(err)
	}
	return nc, nil
}

// validationError is an invalidError for the API server's Invalid answer.
func validationError(err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		return &invalidError{"the API server refused it (dry-run): " + err.Error()}
	}
	return fmt.Errorf("dry-run: %w", err)
}

// serverPlans diff each server's objects as the caches hold them against
// the rendered target.
func serverPlans(p *controller.Preview) []ServerPlan {
	var out []ServerPlan
	targets := map[string]*render.Server{}
	if p.Output != nil {
		for i := range p.Output.Servers {
			targets[p.Output.Servers[i].Name] = &p.Output.Servers[i]
		}
	}
	seen := map[string]bool{}
	for _, s := range p.Servers {
		seen[s.Name] = true
		sp := ServerPlan{Name: s.Name}
		t := targets[s.Name]
		var haveConf, wantConf string
		var haveTpl, wantTpl *corev1.PodTemplateSpec
		if s.ConfigMap != nil {
			haveConf = s.ConfigMap.Data[render.ConfigKey]
		}
		if s.StatefulSet != nil {
			haveTpl = &s.StatefulSet.Spec.Template
		}
		if t != nil {
			wantConf = t.ConfigMap.Data[render.ConfigKey]
			wantTpl = &t.StatefulSet.Spec.Template
		}
		switch {
		case t == nil && p.Output != nil:
			sp.State = "removed"
		case t == nil:
			sp.State = "not rendered"
		case s.StatefulSet == nil:
			sp.State = "new"
		}
		if t != nil {
			sp.Config = lineDiff(withoutRevisions(prettyConfig(haveConf)), withoutRevisions(prettyConfig(wantConf)), 2)
			sp.Template = lineDiff(withoutRevisions(templateYAML(haveTpl)), withoutRevisions(templateYAML(wantTpl)), 2)
			if sp.State == "" {
				sp.State = "unchanged"
				if sp.Config != "" || sp.Template != "" {
					sp.State = "changed"
				}
			}
		}
		out = append(out, sp)
	}
	return out
}

// printPlan prints plan's screen within planWidth columns: prose is
// filled with a hanging indent, a diff line too long for the screen goes
// on over the next lines (indent).
func printPlan(w io.Writer, r *PlanResult) {
	fmt.Fprintln(w, fill("NatsCluster ", r.Cluster, planWidth))
	fmt.Fprintln(w, fill("against     ", r.Against, planWidth))
	fmt.Fprintln(w, "diffs       running -> target (revision lines left out)")
	if r.TargetRevision != "" {
		fmt.Fprintf(w, "target      revision %s\n", r.TargetRevision)
	}
	for _, s := range r.Servers {
		fmt.Fprintf(w, "\nserver %s: %s\n", s.Name, s.State)
		if s.Config != "" {
			fmt.Fprintf(w, "  nats.conf:\n%s", indent(s.Config, "    "))
		}
		if s.Template != "" {
			fmt.Fprintf(w, "  pod template:\n%s", indent(s.Template, "    "))
		}
	}
	v := r.Verdict
	fmt.Fprintln(w)
	printVerdict(w, "decision: ", v)
	for _, n := range r.Notes {
		fmt.Fprintln(w, fill("note: ", n, planWidth))
	}
	fmt.Fprintf(w, "exit code %d\n", v.Exit)
}

// printVerdict prints what the controller would do: the sentence after
// head, the reason and the message.
func printVerdict(w io.Writer, head string, v PlanVerdict) {
	fmt.Fprintln(w, fill(head, v.Sentence, planWidth))
	fmt.Fprintln(w, fill("  reason:  ", v.Reason, planWidth))
	if v.Message != "" {
		fmt.Fprintln(w, fill("  message: ", v.Message, planWidth))
	}
}

// indent puts prefix before every diff line of s. A line too long for
// planWidth columns goes on over the next lines: each piece but the last
// ends with a backslash, and each goes on after the line's own "+ ", "- "
// or "  " (a diff line is code: it is cut at the width, not at spaces).
func indent(s, prefix string) string {
	var sb strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		head := prefix
		if len(l) >= 2 {
			head, l = prefix+l[:2], l[2:]
		}
		room := planWidth - utf8.RuneCountInString(head) - 1
		for utf8.RuneCountInString(l) > room+1 {
			i := byteIndexOfRune(l, room)
			sb.WriteString(head + l[:i] + "\\\n")
			l = l[i:]
		}
		sb.WriteString(head + l + "\n")
	}
	return sb.String()
}
