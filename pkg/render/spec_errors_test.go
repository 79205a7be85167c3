package render_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

func TestSpecsTheCRDCannotCheckAreRefusedNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*clusterv1beta1.NatsCluster)
		field string
	}{
		{"an unknown access mode is refused", func(nc *clusterv1beta1.NatsCluster) {
			nc.Spec.JetStream.VolumeClaimTemplate.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadWriteOnce", "Sometimes"}
		}, "spec.jetstream.volumeClaimTemplate.spec.accessModes[1]"},
		{"a storage request of zero is refused", func(nc *clusterv1beta1.NatsCluster) {
			rendertest.Claim("0", "")(nc)
		}, "spec.jetstream.volumeClaimTemplate.spec.resources.requests.storage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := rendertest.NewCluster("nats", "demo", rendertest.Claim("1Gi", ""))
			tc.edit(nc)
			_, err := render.Render(render.Input{Cluster: nc})
			var se *render.SpecError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *render.SpecError", err)
			}
			if se.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", se.Field, tc.field, err)
			}
		})
	}
	t.Run("a claim template without access modes renders ReadWriteOnce", func(t *testing.T) {
		nc := rendertest.NewCluster("nats", "demo", rendertest.Claim("1Gi", ""))
		nc.Spec.JetStream.VolumeClaimTemplate.Spec.AccessModes = nil
		out, err := render.Render(render.Input{Cluster: nc})
		if err != nil {
			t.Fatal(err)
		}
		got := out.Servers[0].StatefulSet.Spec.VolumeClaimTemplates[0].Spec.AccessModes
		if len(got) != 1 || got[0] != corev1.ReadWriteOnce {
			t.Errorf("access modes %v, want [ReadWriteOnce]", got)
		}
	})
}
