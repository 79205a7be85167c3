package controller

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
)

// gatherLeafCredentials keeps the Secret <name>-leaf-credentials
// (render.LeafCredentialsSuffix) equal to a copy of the creds file of
// every leaf remote with credentials, each under
// render.LeafCredentialsKey(remote), and of the CA of every remote with
// tls under render.LeafCAKey(remote) (leafRemoteCA; their digest is
// f.tls.LeafCAs): the servers read them from the config
// volume, which projects that one Secret whatever the remotes, so adding,
// changing or removing a remote's credentials reloads instead of changing
// the pod template. A remote's Secret or key missing, or a creds file that
// does not parse as one (render.CheckCredsFile: the field may name any key
// of any Secret of the namespace, and what is copied here any sidecar
// mounting the config volume could read), is a referenceError
// (CredentialsNotFound) naming the field: nothing is written. Of a CA only
// the certificates are copied (pemCertificates). The Secret
// is made only once some remote has credentials, and emptied (not
// deleted) when none has any more.
func (g *gatherer) gatherLeafCredentials(ctx context.Context, f *facts) error {
	nc := f.nc
	data := map[string][]byte{}
	if l := nc.Spec.LeafNodes; l != nil {
		for i, r := range l.Remotes {
			if r.Credentials == nil {
				continue
			}
			field := fmt.Sprintf("spec.leafnodes.remotes[%d].credentials", i)
			creds, err := g.credsFile(ctx, nc, *r.Credentials, field,
				fmt.Sprintf("the creds file the servers connect to remote %q with", r.Name))
			if err != nil {
				return err
			}
			if err := render.CheckCredsFile(creds); err != nil {
				return &referenceError{clusterv1beta1.ReasonCredentialsNotFound, fmt.Sprintf(
					"%s: Secret %s/%s key %q is not a NATS creds file: %v; put the creds file of the user remote %q connects as under it (nothing of it is copied until then)",
					field, nc.Namespace, r.Credentials.Name, keyOr(r.Credentials.Key, "user.creds"), err, r.Name)}
			}
			data[render.LeafCredentialsKey(r.Name)] = creds
		}
		var cas [][]byte
		for i, r := range l.Remotes {
			if r.TLS == nil {
				continue
			}
			ca, err := g.leafRemoteCA(ctx, nc, i, r)
			if err != nil {
				return err
			}
			data[render.LeafCAKey(r.Name)] = ca
			cas = append(cas, []byte(r.Name), ca)
		}
		if len(cas) > 0 {
			f.tls.LeafCAs = secretDigest(cas...)
		}
	}
	name := render.LeafCredentialsSecretName(nc.Name)
	s, err := g.controlledSecret(ctx, nc, name)
	if err != nil {
		return err
	}
	if (s == nil && len(data) == 0) || (s != nil && maps.EqualFunc(s.Data, data, bytes.Equal)) {
		return nil
	}
	f.tlsSecrets = append(f.tlsSecrets, ownedSecret(nc, name, s, data))
	return nil
}

// leafRemoteCA is the CA remote i's hub is verified against: its
// tls.caSecret's, else the routes CA of its clusterRef NatsCluster, their
// PEM certificates only (a key or anything else beside them in the Secret
// is not copied); a referenceError (CertificateNotReady) naming the field
// when neither holds a certificate (a CA missing would leave the remote
// unable to connect).
func (g *gatherer) leafRemoteCA(ctx context.Context, nc *clusterv1beta1.NatsCluster, i int, r clusterv1beta1.LeafNodeRemote) ([]byte, error) {
	field := fmt.Sprintf("spec.leafnodes.remotes[%d].tls", i)
	if sel := r.TLS.CASecret; sel != nil {
		return g.caSecret(ctx, nc, *sel, field+".caSecret", "the PEM CA certificates of the hub")
	}
	if r.ClusterRef == nil {
		return nil, &referenceError{clusterv1beta1.ReasonCertificateNotReady, field + ": a remote by urls needs tls.caSecret, the CA its hub is verified against"}
	}
	ns := cmp.Or(r.ClusterRef.Namespace, nc.Namespace)
	ca, err := g.remoteRoutesCA(ctx, ns, r.ClusterRef.Name)
	if err != nil {
		return nil, err
	}
	if caDigests(ca) == "" {
		return nil, &referenceError{clusterv1beta1.ReasonCertificateNotReady, fmt.Sprintf(
			"%s: the routes CA of NatsCluster %s/%s is not there yet (its Secret %s%s, or the CA of its spec.routes.tls.secret), "+
				"and the hub's certificate is verified against it: waiting for it", field, ns, r.ClusterRef.Name, r.ClusterRef.Name, routesCASuffix)}
	}
	return ca, nil
}
