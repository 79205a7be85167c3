package render

import (
	"testing"
)

// A client CA from another Secret (the controller's bundle under
// verifyClients) is projected from that Secret alone: the client Secret
// gives the certificate and key, and never a second ca.crt at the same
// path, which the API server refuses.
func TestClientCAFromAnotherSecretIsProjectedFromIt(t *testing.T) {
	files := &TLSFiles{Secret: "my-tls", CertKey: "crt", KeyKey: "key", CAKey: "ca.crt", CASecret: "demo" + ClientCASuffix, Verify: true}
	v := configVolume("demo", "demo-0-config", TLS{Client: files}, false)
	got := map[string]string{}
	for _, src := range v.Projected.Sources {
		if src.Secret == nil {
			continue
		}
		for _, it := range src.Secret.Items {
			if old, dup := got[it.Path]; dup {
				t.Errorf("%s projected twice: from %s and %s/%s", it.Path, old, src.Secret.Name, it.Key)
			}
			got[it.Path] = src.Secret.Name + "/" + it.Key
		}
	}
	want := map[string]string{
		ClientTLSDir + "/tls.crt": "my-tls/crt",
		ClientTLSDir + "/tls.key": "my-tls/key",
		ClientTLSDir + "/ca.crt":  "demo-client-ca/ca.crt",
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s from %q, want %q", p, got[p], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("projected %v, want %v", got, want)
	}
	c := tlsBlock(files, ClientTLSDir)
	if c.CAFile != ConfigDir+"/"+ClientTLSDir+"/ca.crt" || !c.Verify {
		t.Errorf("tls block %+v, want ca_file client-tls/ca.crt and verify", c)
	}
}
