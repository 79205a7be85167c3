package controller

import (
	"bytes"
	"context"
	"fmt"
	"maps"

	"github.com/nats-operator/nats-operator/pkg/render"
)

// gatherLeafCredentials keeps the Secret <name>-leaf-credentials
// (render.LeafCredentialsSuffix) equal to a copy of the creds file of
// every leaf remote with credentials, each under
// render.LeafCredentialsKey(remote): the servers read them from the config
// volume, which projects that one Secret whatever the remotes, so adding,
// changing or removing a remote's credentials reloads instead of changing
// the pod template. A remote's Secret or key missing is a referenceError
// (CredentialsNotFound) naming the field: nothing is written. The Secret
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
			creds, err := g.credsFile(ctx, nc, *r.Credentials, fmt.Sprintf("spec.leafnodes.remotes[%d].credentials", i),
				fmt.Sprintf("the creds file the servers connect to remote %q with", r.Name))
			if err != nil {
				return err
			}
			data[render.LeafCredentialsKey(r.Name)] = creds
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
