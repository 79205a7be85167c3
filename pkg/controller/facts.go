package controller

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nats-operator/nats-operator/internal/pki"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// clone is a deep copy of the facts, for checking that nothing writes
// them after gathering (Controller.checkFacts).
func (f *facts) clone() *facts {
	c := *f
	c.nc = f.nc.DeepCopy()
	if f.trust != nil {
		t := *f.trust
		t.Accounts = slices.Clone(f.trust.Accounts)
		c.trust = &t
	}
	c.systemCreds = slices.Clone(f.systemCreds)
	c.migrationBackups, c.migrationRestores = nil, nil
	for _, b := range f.migrationBackups {
		c.migrationBackups = append(c.migrationBackups, b.DeepCopy())
	}
	for _, r := range f.migrationRestores {
		c.migrationRestores = append(c.migrationRestores, r.DeepCopy())
	}
	c.systemCredsMinted = f.systemCredsMinted
	cloneServers := func(in []serverObjects) []serverObjects {
		if in == nil {
			return nil
		}
		out := make([]serverObjects, len(in))
		for i, so := range in {
			out[i] = serverObjects{name: so.name, ordinal: so.ordinal,
				statefulSet: so.statefulSet.DeepCopy(), configMap: so.configMap.DeepCopy(), pod: so.pod.DeepCopy(), podGoing: so.podGoing}
		}
		return out
	}
	c.servers, c.extra = cloneServers(f.servers), cloneServers(f.extra)
	c.shared = sharedObjects{clientService: f.shared.clientService.DeepCopy(), headlessService: f.shared.headlessService.DeepCopy(), pdb: f.shared.pdb.DeepCopy()}
	c.networkPolicy = f.networkPolicy.DeepCopy()
	c.podMonitor = deepCopyUnstructured(f.podMonitor)
	c.certificate = deepCopyUnstructured(f.certificate)
	c.certificateWrite = deepCopyUnstructured(f.certificateWrite)
	if f.systemUser != nil {
		su := *f.systemUser
		su.seed = slices.Clone(su.seed)
		if su.render != nil {
			r := *su.render
			su.render = &r
		}
		c.systemUser = &su
	}
	c.freshSystemUser = f.freshSystemUser.DeepCopy()
	c.upgradedSystemUser = f.upgradedSystemUser.DeepCopy()
	c.tls = render.TLS{Routes: copyFiles(f.tls.Routes), Client: copyFiles(f.tls.Client), Gateway: copyFiles(f.tls.Gateway), LeafCAs: f.tls.LeafCAs}
	c.tlsCA = slices.Clone(f.tlsCA)
	c.routesCA = slices.Clone(f.routesCA)
	if f.clientCert != nil {
		c.clientCert = &pki.Pair{Cert: slices.Clone(f.clientCert.Cert), Key: slices.Clone(f.clientCert.Key)}
	}
	c.tlsSecrets = slices.Clone(f.tlsSecrets)
	for i, s := range c.tlsSecrets {
		c.tlsSecrets[i] = s.DeepCopy()
	}
	if f.claims != nil {
		c.claims = map[int32]*corev1.PersistentVolumeClaim{}
		for k, v := range f.claims {
			c.claims[k] = v.DeepCopy()
		}
	}
	c.expandable = maps.Clone(f.expandable)
	if f.unresolved != nil {
		u := *f.unresolved
		c.unresolved = &u
	}
	return &c
}

func deepCopyUnstructured(u *unstructured.Unstructured) *unstructured.Unstructured {
	if u == nil {
		return nil
	}
	return u.DeepCopy()
}

func copyFiles(t *render.TLSFiles) *render.TLSFiles {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

// serverNames are the names of the servers of the spec, in ordinal order.
func (f *facts) serverNames() []string {
	out := make([]string, len(f.servers))
	for i, so := range f.servers {
		out[i] = so.name
	}
	return out
}
