package render_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// policyRules are a NetworkPolicy's ingress rules, one string each:
// "<ports> from <peer>; <peer>", a peer written as "namespace <name>" (a
// selector on kubernetes.io/metadata.name alone) or "namespace {labels}",
// "pods {labels}" and "ipBlock <cidr>", joined by " and " within one peer
// (all must match); "anywhere" for a rule without peers.
func policyRules(t *testing.T, np *networkingv1.NetworkPolicy) []string {
	t.Helper()
	var out []string
	for _, r := range np.Spec.Ingress {
		var ports []string
		for _, p := range r.Ports {
			if p.Protocol == nil || *p.Protocol != "TCP" || p.Port == nil || p.EndPort != nil {
				t.Errorf("rule %+v: port %+v is not one named TCP port", r, p)
				continue
			}
			ports = append(ports, p.Port.String())
		}
		from := []string{"anywhere"}
		if len(r.From) > 0 {
			from = nil
		}
		for _, p := range r.From {
			from = append(from, peerString(t, p))
		}
		out = append(out, strings.Join(ports, ",")+" from "+strings.Join(from, "; "))
	}
	return out
}

func peerString(t *testing.T, p networkingv1.NetworkPolicyPeer) string {
	t.Helper()
	labels := func(s *metav1.LabelSelector) string {
		if len(s.MatchExpressions) > 0 {
			t.Errorf("selector %+v has expressions", s)
		}
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
			kv = append(kv, k+"="+s.MatchLabels[k])
		}
		return "{" + strings.Join(kv, ",") + "}"
	}
	var sel []string
	if s := p.NamespaceSelector; s != nil {
		if name, ok := s.MatchLabels[render.NamespaceNameLabel]; ok && len(s.MatchLabels) == 1 && len(s.MatchExpressions) == 0 {
			sel = append(sel, "namespace "+name)
		} else {
			sel = append(sel, "namespace "+labels(s))
		}
	}
	if p.PodSelector != nil {
		sel = append(sel, "pods "+labels(p.PodSelector))
	}
	if p.IPBlock != nil {
		sel = append(sel, fmt.Sprintf("ipBlock %s except %v", p.IPBlock.CIDR, p.IPBlock.Except))
	}
	return strings.Join(sel, " and ")
}

// admitted is who each port admits, over every rule: port -> peers.
func admitted(t *testing.T, np *networkingv1.NetworkPolicy) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range np.Spec.Ingress {
		from := []string{"anywhere"}
		if len(r.From) > 0 {
			from = nil
		}
		for _, p := range r.From {
			from = append(from, peerString(t, p))
		}
		for _, p := range r.Ports {
			out[p.Port.String()] = append(out[p.Port.String()], from...)
		}
	}
	for port := range out {
		slices.Sort(out[port])
	}
	return out
}

const (
	controllerPeer = "namespace ops and pods {app.kubernetes.io/name=nats-operator}"
	jobsPeer       = "pods {app.kubernetes.io/managed-by=nats-operator,cluster.nats-operator.io/job-of=demo}"
	serversPeer    = "pods {cluster.nats-operator.io/cluster=demo}"
)

// The NetworkPolicy is closed by default and admits each port from who
// connects to it, each peer in a rule of its own: the client port from
// clientsFrom (by default the cluster's own namespace), from the
// controller's pods (namespace and pod selector in one peer: both must
// match), which send every $SYS request there, and from the cluster's own
// backup and restore Jobs (a pod selector alone: the cluster's namespace);
// the route port from the cluster's servers only; the monitoring port from
// the controller's pods only; no metrics rule until metricsFrom names who
// may scrape. clientsFrom replaces the default namespace but never the
// controller or the Jobs; the WebSocket and MQTT ports follow clientsFrom
// alone (neither the controller nor the Jobs dial them).
func TestTheNetworkPolicyFollowsTheSpec(t *testing.T) {
	nc := rt.NewCluster("ns", "demo", rt.JetStream())
	np := render.NetworkPolicy(nc, "ops")
	if np == nil || np.Name != "demo" || np.Namespace != "ns" || !maps.Equal(np.Spec.PodSelector.MatchLabels, render.ClusterSelector("demo")) {
		t.Fatalf("NetworkPolicy %+v", np)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(np.Spec.Egress) != 0 {
		t.Errorf("policyTypes %v, egress %v; want Ingress only", np.Spec.PolicyTypes, np.Spec.Egress)
	}
	check := func(what string, np *networkingv1.NetworkPolicy, rules []string, byPort map[string][]string) {
		t.Helper()
		if got := policyRules(t, np); !slices.Equal(got, rules) {
			t.Errorf("%s: rules\n  %s\nwant\n  %s", what, strings.Join(got, "\n  "), strings.Join(rules, "\n  "))
		}
		got := admitted(t, np)
		for port, from := range byPort {
			slices.Sort(from)
			if !slices.Equal(got[port], from) {
				t.Errorf("%s: port %s admits %q, want %q", what, port, got[port], from)
			}
		}
		for port := range got {
			if _, ok := byPort[port]; !ok {
				t.Errorf("%s: port %s admits %q, want no rule", what, port, got[port])
			}
		}
	}

	check("default", np, []string{
		"client from namespace ns",
		"client from " + controllerPeer,
		"client from " + jobsPeer,
		"cluster from " + serversPeer,
		"monitor from " + controllerPeer,
	}, map[string][]string{
		"client":  {"namespace ns", controllerPeer, jobsPeer},
		"cluster": {serversPeer},
		"monitor": {controllerPeer},
	})

	// Clients in another namespace, and WebSocket and MQTT: the controller
	// and the Jobs still reach the client port, and only it.
	nc.Spec.NetworkPolicy.ClientsFrom = []networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{render.NamespaceNameLabel: "apps"}}},
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "web"}}, PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "api"}}},
	}
	nc.Spec.WebSocket = &clusterv1beta1.WebSocketSpec{Port: 8080, NoTLS: true}
	nc.Spec.MQTT = &clusterv1beta1.MQTTSpec{Port: 1883, NoTLS: true}
	apps := []string{"namespace apps", "namespace {team=web} and pods {role=api}"}
	check("clientsFrom apps, websocket and mqtt", render.NetworkPolicy(nc, "ops"), []string{
		"client,websocket,mqtt from " + strings.Join(apps, "; "),
		"client from " + controllerPeer,
		"client from " + jobsPeer,
		"cluster from " + serversPeer,
		"monitor from " + controllerPeer,
	}, map[string][]string{
		"client":    append(slices.Clone(apps), controllerPeer, jobsPeer),
		"websocket": apps,
		"mqtt":      apps,
		"cluster":   {serversPeer},
		"monitor":   {controllerPeer},
	})
	nc.Spec.WebSocket, nc.Spec.MQTT = nil, nil

	// metricsFrom opens the metrics port to it alone.
	nc.Spec.NetworkPolicy.MetricsFrom = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{render.NamespaceNameLabel: "monitoring"}}}}
	check("metricsFrom monitoring", render.NetworkPolicy(nc, "ops"), []string{
		"client from " + strings.Join(apps, "; "),
		"client from " + controllerPeer,
		"client from " + jobsPeer,
		"cluster from " + serversPeer,
		"monitor from " + controllerPeer,
		"metrics from namespace monitoring",
	}, map[string][]string{
		"client":  append(slices.Clone(apps), controllerPeer, jobsPeer),
		"cluster": {serversPeer},
		"monitor": {controllerPeer},
		"metrics": {"namespace monitoring"},
	})

	// Without the exporter, no metrics rule whatever metricsFrom says.
	nc.Spec.Metrics.Enabled = new(false)
	if got := admitted(t, render.NetworkPolicy(nc, "ops")); got["metrics"] != nil || render.PodMonitor(nc) != nil {
		t.Errorf("without metrics: metrics port from %v, PodMonitor %v; want no rule and none", got["metrics"], render.PodMonitor(nc))
	}
	nc.Spec.NetworkPolicy.Enabled = new(false)
	if np := render.NetworkPolicy(nc, "ops"); np != nil {
		t.Errorf("disabled: %+v", np)
	}
}

// Render admits the controller from Input.ControllerNamespace, and from
// DefaultControllerNamespace without one, to both ports it dials.
func TestTheNetworkPolicyAdmitsTheControllersNamespace(t *testing.T) {
	for ns, want := range map[string]string{"": render.DefaultControllerNamespace, "ops": "ops"} {
		out, err := render.Render(render.Input{Cluster: rt.NewCluster("ns", "demo"), ControllerNamespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		peer := "namespace " + want + " and pods {app.kubernetes.io/name=nats-operator}"
		got := admitted(t, out.NetworkPolicy)
		if !slices.Contains(got["client"], peer) || !slices.Equal(got["monitor"], []string{peer}) {
			t.Errorf("controller namespace %q: client from %q, monitor from %q; want %q on both", ns, got["client"], got["monitor"], peer)
		}
	}
}
