package localnode

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func testRewriter() *rewriter {
	return &rewriter{
		podIP: "127.0.0.2",
		mounts: map[string]string{
			"/etc/nats-config": "/root/pods/p/volumes/config",
			"/data":            "/root/pvc/ns/data-demo-0-0",
			"/var/run/nats":    "/root/pods/p/volumes/pid",
		},
		binary: "/cache/nats-server-v2.15.2/nats-server",
	}
}

func TestRewriterString(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"a wildcard listen address becomes the pod address", "0.0.0.0:4222", "127.0.0.2:4222"},
		{"a bare wildcard host becomes the pod address", "0.0.0.0", "127.0.0.2"},
		{"a wildcard in a URL becomes the pod address", "nats://0.0.0.0:6222", "nats://127.0.0.2:6222"},
		{"a route to a pod DNS name is kept, for the pod's /etc/hosts", "nats://demo-1-0.demo-headless.ns.svc:6222", "nats://demo-1-0.demo-headless.ns.svc:6222"},
		{"a pod DNS name with cluster.local is kept", "nats://demo-1-0.demo-headless.ns.svc.cluster.local:6222", "nats://demo-1-0.demo-headless.ns.svc.cluster.local:6222"},
		{"a pod DNS name in another namespace is kept", "x-0.svc-h.other.svc", "x-0.svc-h.other.svc"},
		{"a mount path becomes the local path", "/data/jetstream", "/root/pvc/ns/data-demo-0-0/jetstream"},
		{"a mount path alone becomes the local path", "/data", "/root/pvc/ns/data-demo-0-0"},
		{"a path that only starts like a mount path is kept", "/database/x", "/database/x"},
		{"a mount path after an equals sign is rewritten", "ldm=/var/run/nats/nats.pid", "ldm=/root/pods/p/volumes/pid/nats.pid"},
		{"a service name that is not a pod name is kept", "demo.ns", "demo.ns"},
		{"other strings are kept", "hello world", "hello world"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testRewriter().String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRewriterCommand(t *testing.T) {
	tests := []struct {
		name     string
		in, want []string
	}{
		{
			"the server command uses the local binary and config",
			[]string{"nats-server", "--config", "/etc/nats-config/nats.conf"},
			[]string{"/cache/nats-server-v2.15.2/nats-server", "--config", "/root/pods/p/volumes/config/nats.conf"},
		},
		{
			"the lame duck hook signals through the local pid file",
			[]string{"nats-server", "--signal", "ldm=/var/run/nats/nats.pid"},
			[]string{"/cache/nats-server-v2.15.2/nats-server", "--signal", "ldm=/root/pods/p/volumes/pid/nats.pid"},
		},
		{
			"an absolute server path uses the local binary",
			[]string{"/nats-server", "-c", "/etc/nats-config/nats.conf"},
			[]string{"/cache/nats-server-v2.15.2/nats-server", "-c", "/root/pods/p/volumes/config/nats.conf"},
		},
		{
			"a shell hook has the server word and paths rewritten",
			[]string{"sh", "-c", "nats-server --signal ldm=/var/run/nats/nats.pid && sleep 5"},
			[]string{"sh", "-c", "/cache/nats-server-v2.15.2/nats-server --signal ldm=/root/pods/p/volumes/pid/nats.pid && sleep 5"},
		},
		{
			"a flag listening on a port of every interface listens on the pod address",
			[]string{"nats-server", "--health-addr=:8081", "-metrics-addr", ":8080", "--peer=host:8081", "--x=a:8081"},
			[]string{"/cache/nats-server-v2.15.2/nats-server", "--health-addr=127.0.0.2:8081", "-metrics-addr", "127.0.0.2:8080", "--peer=host:8081", "--x=a:8081"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, testRewriter().Command(tt.in)); diff != "" {
				t.Errorf("Command(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestRewriteFile(t *testing.T) {
	tests := []struct {
		name, path, in, want string
	}{
		{
			name: "a server config gets local addresses and paths, and keeps its routes' DNS names",
			path: "nats.conf",
			in: `{"server_name":"demo-0","listen":"0.0.0.0:4222","http":"0.0.0.0:8222","pid_file":"/var/run/nats/nats.pid",
				"jetstream":{"store_dir":"/data/jetstream","max_file_store":10737418240},
				"cluster":{"name":"demo","listen":"0.0.0.0:6222","routes":["nats://demo-0-0.demo-headless.ns.svc:6222","nats://demo-1-0.demo-headless.ns.svc:6222"]}}`,
			want: `{"cluster":{"listen":"127.0.0.2:6222","name":"demo","routes":["nats://demo-0-0.demo-headless.ns.svc:6222","nats://demo-1-0.demo-headless.ns.svc:6222"]},
				"http":"127.0.0.2:8222","jetstream":{"max_file_store":10737418240,"store_dir":"/root/pvc/ns/data-demo-0-0/jetstream"},
				"listen":"127.0.0.2:4222","pid_file":"/root/pods/p/volumes/pid/nats.pid","server_name":"demo-0"}`,
		},
		{
			name: "a server config without hosts gets the pod address as host",
			path: "nats.json",
			in:   `{"port":4222,"http_port":8222,"cluster":{"port":6222},"leafnodes":{"listen":":7422"}}`,
			want: `{"cluster":{"host":"127.0.0.2","port":6222},"host":"127.0.0.2","http_port":8222,"leafnodes":{"listen":"127.0.0.2:7422"},"port":4222}`,
		},
		{
			name: "a leafnodes block with remotes only does not listen and gets no host",
			path: "nats.conf",
			in:   `{"listen":"0.0.0.0:4222","leafnodes":{"remotes":[{"urls":["nats://hub-headless.ns.svc:7422"]}]}}`,
			want: `{"leafnodes":{"remotes":[{"urls":["nats://hub-headless.ns.svc:7422"]}]},"listen":"127.0.0.2:4222"}`,
		},
		{
			name: "JSON that is not a server config gets no host",
			path: "other.json",
			in:   `{"a":"0.0.0.0:1","b":"/data/x"}`,
			want: `{"a":"0.0.0.0:1","b":"/root/pvc/ns/data-demo-0-0/x"}`,
		},
		{
			name: "a config in the nats format is kept as it is",
			path: "nats.conf",
			in:   "listen: 0.0.0.0:4222\n",
			want: "listen: 0.0.0.0:4222\n",
		},
		{
			name: "a file of another kind is kept as it is",
			path: "routes.txt",
			in:   `{"listen":"0.0.0.0:4222"}`,
			want: `{"listen":"0.0.0.0:4222"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rewriteFile(tt.path, []byte(tt.in), testRewriter())
			if json.Valid([]byte(tt.want)) {
				var g, w any
				if err := json.Unmarshal(got, &g); err != nil {
					t.Fatalf("output is not JSON: %v\n%s", err, got)
				}
				_ = json.Unmarshal([]byte(tt.want), &w)
				if diff := cmp.Diff(w, g); diff != "" {
					t.Errorf("rewriteFile (-want +got):\n%s", diff)
				}
				if strings.HasPrefix(tt.name, "a server config gets local addresses") && !json.Valid(got) {
					t.Errorf("invalid JSON")
				}
				return
			}
			if string(got) != tt.want {
				t.Errorf("rewriteFile = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRewriteFileKeepsLargeNumbersExact(t *testing.T) {
	got := rewriteFile("nats.conf", []byte(`{"port":4222,"max_payload":10737418240}`), testRewriter())
	var m map[string]json.RawMessage
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	if string(m["max_payload"]) != "10737418240" {
		t.Errorf("max_payload = %s, want 10737418240", m["max_payload"])
	}
}
