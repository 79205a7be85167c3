package render_test

import (
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// spec.gateway renders a gateway block nats-server loads (its name also
// cluster.name), each clusterRef as the referenced cluster's headless
// Service, the gateway port on the container, the headless Service and in
// the NetworkPolicy, and the Gateway facts; a remote naming the cluster
// itself is a SpecError.
func TestGatewayIsRenderedAndLoadsInNatsServer(t *testing.T) {
	remotes := []clusterv1beta1.GatewayRemote{
		rt.GatewayTo("west", "west"),
		{Name: "far", URLs: []string{"nats://far-1.example.com:7222", "tls://far-0.example.com:7522"}},
		{Name: "near", ClusterRef: &clusterv1beta1.NatsClusterReference{Name: "near"}},
	}
	nc := rt.NewCluster("east", "demo", rt.JetStream(), rt.Gateway(remotes...))
	nc.Spec.Gateway.Name, nc.Spec.Gateway.Advertise, nc.Spec.Gateway.RejectUnknownCluster = "east", "gw.example.com:32022", true
	out, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Servers {
		o := loadRendered(t, s.Config)
		if o.Gateway.Name != "east" || o.Cluster.Name != "east" || o.Gateway.Port != 7222 || o.Gateway.Advertise != "gw.example.com:32022" || !o.Gateway.RejectUnknown {
			t.Errorf("%s: nats-server reads gateway %q port %d advertise %q reject %t, cluster %q", s.Name, o.Gateway.Name, o.Gateway.Port, o.Gateway.Advertise, o.Gateway.RejectUnknown, o.Cluster.Name)
		}
		got := map[string][]string{}
		for _, g := range o.Gateway.Gateways {
			for _, u := range g.URLs {
				got[g.Name] = append(got[g.Name], u.String())
			}
		}
		want := map[string][]string{
			"west": {"nats://west-headless.west.svc:7222"},
			"far":  {"nats://far-1.example.com:7222", "tls://far-0.example.com:7522"},
			"near": {"nats://near-headless.east.svc:7222"},
		}
		for name, urls := range want {
			if !slices.Equal(got[name], urls) {
				t.Errorf("%s: remote %s has URLs %v, want %v", s.Name, name, got[name], urls)
			}
		}
		if !s.Facts.Gateway || s.Facts.GatewayRemotes != "far=nats://far-1.example.com:7222,tls://far-0.example.com:7522; near=nats://near-headless.east.svc:7222; west=nats://west-headless.west.svc:7222; advertise=gw.example.com:32022; reject_unknown_cluster" {
			t.Errorf("%s: facts Gateway %t GatewayRemotes %q", s.Name, s.Facts.Gateway, s.Facts.GatewayRemotes)
		}
		ports := s.StatefulSet.Spec.Template.Spec.Containers[0].Ports
		if !slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool { return p.Name == "gateway" && p.ContainerPort == 7222 }) {
			t.Errorf("%s: container ports %v have no gateway 7222", s.Name, ports)
		}
	}
	if !slices.ContainsFunc(out.HeadlessService.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "gateway" && p.Port == 7222 }) {
		t.Errorf("headless Service ports %v have no gateway 7222", out.HeadlessService.Spec.Ports)
	}
	found := false
	for _, r := range out.NetworkPolicy.Spec.Ingress {
		if len(r.Ports) == 1 && r.Ports[0].Port.StrVal == "gateway" && len(r.From) == 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("the NetworkPolicy admits no gateway port from anywhere: %+v", out.NetworkPolicy.Spec.Ingress)
	}

	for _, self := range []clusterv1beta1.GatewayRemote{rt.GatewayTo("east", "demo"), {Name: "demo", URLs: []string{"nats://x:7222"}}} {
		_, err := render.Render(render.Input{Cluster: rt.NewCluster("east", "demo", rt.JetStream(), rt.Gateway(self))})
		var se *render.SpecError
		if !errors.As(err, &se) {
			t.Errorf("a remote %+v naming the cluster itself rendered: %v", self, err)
		} else {
			t.Logf("refused: %v", se)
		}
	}
}
