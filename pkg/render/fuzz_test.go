package render_test

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// FuzzRender renders clusters with arbitrary tags, domain, version and
// sizes: every render either fails or gives configs nats-server loads with
// the tags intact, and renders the same bytes twice.
func FuzzRender(f *testing.F) {
	f.Add(uint8(3), "2.15.2", "region", "eu-west-1", "hub", uint32(1024))
	f.Add(uint8(1), "2.10.1", "a\"b", `c\d`, "", uint32(0))
	f.Add(uint8(5), "2.11.0-RC.1", "k", "v:w {x} [y] $z #c // d", "d_1", uint32(7))
	f.Add(uint8(2), "x.y", "tab", "a\tb", "", uint32(1))
	f.Fuzz(func(t *testing.T, replicas uint8, version, tagKey, tagValue, domain string, memMiB uint32) {
		if !utf8.ValidString(tagKey) || !utf8.ValidString(tagValue) || tagKey == "" {
			t.Skip()
		}
		opts := []rt.ClusterOption{rt.Replicas(int32(replicas%6) + 1), rt.Version(version), rt.Domain(domainOK(domain)), rt.ServerTag(tagKey, tagValue)}
		if memMiB > 0 {
			opts = append(opts, rt.MemoryLimit(itoa(memMiB%65536+1)+"Mi"))
		}
		nc := rt.NewCluster("ns", "demo", opts...)
		a, err := render.Render(render.Input{Cluster: nc})
		if err != nil {
			return
		}
		b, err := render.Render(render.Input{Cluster: nc.DeepCopy()})
		if err != nil || a.Revision != b.Revision || !bytes.Equal(a.Servers[0].Config, b.Servers[0].Config) {
			t.Fatalf("two renders differ: %v", err)
		}
		o := loadRendered(t, a.Servers[0].Config)
		if len(o.Tags) != 1 {
			t.Fatalf("tags = %q, want one", o.Tags)
		}
	})
}

func domainOK(d string) string {
	out := []byte{}
	for i := 0; i < len(d) && len(out) < 64; i++ {
		c := d[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			out = append(out, c)
		}
	}
	return string(out)
}

func itoa(n uint32) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
