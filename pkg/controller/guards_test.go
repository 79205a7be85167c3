package controller

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

func renderFor(t *testing.T, nc *clusterv1beta1.NatsCluster) *render.Output {
	t.Helper()
	out, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// servers of a cluster as the caches would hold them after creation.
func runningServers(out *render.Output) ([]*appsv1.StatefulSet, []serverObjects) {
	var stss []*appsv1.StatefulSet
	var sos []serverObjects
	for _, s := range out.Servers {
		sts := s.StatefulSet.DeepCopy()
		stss = append(stss, sts)
		sos = append(sos, serverObjects{name: s.Name, ordinal: s.Ordinal, statefulSet: sts})
	}
	return stss, sos
}

func TestUnsupportedChanges(t *testing.T) {
	base := func(opts ...rendertest.ClusterOption) *clusterv1beta1.NatsCluster {
		nc := rendertest.NewCluster("ns", "demo", append([]rendertest.ClusterOption{
			rendertest.Replicas(3), rendertest.Version("2.15.2"), rendertest.Claim("1Gi", "")}, opts...)...)
		nc.UID = "cluster-uid"
		return nc
	}
	running := base()
	stss, sos := runningServers(renderFor(t, running))

	tests := []struct {
		name string
		nc   *clusterv1beta1.NatsCluster
		want string // substring; "" means supported
	}{
		{"the spec the servers were created from is supported", base(), ""},
		{"a version change is supported", base(rendertest.Version("2.15.1")), ""},
		{"more replicas are supported", base(rendertest.Replicas(5)), ""},
		{"fewer replicas are held, naming the servers that still run", base(rendertest.Replicas(1)), "servers demo-1, demo-2 still run"},
		{"a larger claim is held: claim templates are immutable", base(rendertest.Claim("2Gi", "")), "volumeClaimTemplate differs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := renderFor(t, tt.nc)
			servers := sos
			if len(servers) > int(tt.nc.Spec.Replicas) {
				servers = servers[:tt.nc.Spec.Replicas]
			}
			for len(servers) < int(tt.nc.Spec.Replicas) {
				servers = append(servers, serverObjects{name: render.ServerName("demo", int32(len(servers)))})
			}
			owned := make([]*appsv1.StatefulSet, len(stss))
			for i, sts := range stss {
				sts = sts.DeepCopy()
				sts.OwnerReferences = []metav1.OwnerReference{render.OwnerReference(tt.nc)}
				owned[i] = sts
			}
			got := unsupportedChange(tt.nc, owned, servers, out)
			switch {
			case tt.want == "" && got != "":
				t.Errorf("held: %s", got)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Errorf("got %q, want it to contain %q", got, tt.want)
			}
		})
	}
}
