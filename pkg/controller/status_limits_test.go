package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// kubectl describe shows status.jetstream.limits: a derived limit reads as a
// Kubernetes quantity (972Mi, not 1020054732), a limit in spec as written.
func TestStatusLimitsReadAsQuantities(t *testing.T) {
	for _, tc := range []struct {
		name           string
		nc             *clusterv1beta1.NatsCluster
		memory, stored string
	}{
		{"95% of a 1Gi claim rounds down to whole MiB", rt.NewCluster("ns", "d", rt.Claim("1Gi", "")), "", "972Mi"},
		{"75% of 1Gi memory is whole already", rt.NewCluster("ns", "d", rt.MemoryLimit("1Gi"), rt.Claim("10Gi", "")), "768Mi", "9728Mi"},
		{"a limit set in spec is shown as given", rt.NewCluster("ns", "d", rt.Claim("1Gi", ""), rt.JetStreamLimits("", "1000000000")), "", "1G"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := readableLimits(&tc.nc.Spec)
			if got := quantityString(l.MaxMemoryStore); got != tc.memory {
				t.Errorf("maxMemoryStore %q, want %q", got, tc.memory)
			}
			if got := quantityString(l.MaxFileStore); got != tc.stored {
				t.Errorf("maxFileStore %q, want %q", got, tc.stored)
			}
		})
	}
}

func quantityString(q *resource.Quantity) string {
	if q == nil {
		return ""
	}
	return q.String()
}
