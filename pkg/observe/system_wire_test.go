package observe

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-operator/nats-operator/internal/poll"
	"github.com/nats-operator/nats-operator/pkg/render"
	rt "github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

// fakeServer listens where a stopped server listened, as another pod given
// its address would, and records the CONNECT line of every client that
// dials it: it sends an INFO with a nonce, reads CONNECT and refuses it.
type fakeServer struct {
	ln       net.Listener
	mu       sync.Mutex
	connects []map[string]any
	dials    int
}

func listenFake(t *testing.T, addr string) *fakeServer {
	t.Helper()
	var ln net.Listener
	// The stopped server's listener may take a moment to let the port go.
	poll.Eventually(t, 10*time.Second, 50*time.Millisecond, "listening on "+addr, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	f := &fakeServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeServer) serve(c net.Conn) {
	defer c.Close()
	f.mu.Lock()
	f.dials++
	f.mu.Unlock()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "INFO {\"server_id\":\"NFAKE\",\"server_name\":\"another-pod\",\"version\":\"2.15.2\",\"proto\":1,\"max_payload\":1048576,\"auth_required\":true,\"nonce\":\"%s\"}\r\n", "bm9uY2Utb2YtYW5vdGhlci1wb2Q")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	var m map[string]any
	if body, ok := strings.CutPrefix(strings.TrimSpace(line), "CONNECT "); ok && json.Unmarshal([]byte(body), &m) == nil {
		f.mu.Lock()
		f.connects = append(f.connects, m)
		f.mu.Unlock()
	}
	fmt.Fprint(c, "-ERR 'Authorization Violation'\r\n")
}

func (f *fakeServer) seen() (dials int, connects []map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials, append([]map[string]any(nil), f.connects...)
}

// The controller's $SYS connection as the nkey system user sends no
// password: a server that takes a stopped server's address (another pod,
// maybe of another tenant) reads in its CONNECT only the nkey's public key
// and a signature of its own nonce. The connection is never redialled once
// its server is gone: the address is not dialled again until a System call
// names the pod there now (a new pod UID), and the password user, dialled
// the same way, does show its password: the listener would see one.
func TestSystemConnectionSendsNoPasswordAndNeverRedials(t *testing.T) {
	_, lc, target := startRenderedCluster(t, rt.NKeySystemUser())
	target.Servers = target.Servers[:1]
	target.Servers[0].PodUID = "pod-uid-a"
	target.SystemNKeySeed = []byte(rt.SystemUserSeed)
	o := New(Options{})
	defer o.Close()
	ctx := context.Background()

	sys, err := o.System(ctx, target)
	if err != nil {
		t.Fatalf("connecting to $SYS as the nkey system user: %v", err)
	}
	if _, err := sys.ServerID(ctx, "demo-0"); err != nil {
		t.Fatalf("a $SYS request as the nkey system user: %v", err)
	}

	l := lc.Locals[0]
	addr := net.JoinHostPort(l.Host, fmt.Sprint(l.ClientPort))
	lc.Servers[0].Shutdown()
	lc.Servers[0].WaitForShutdown()
	fake := listenFake(t, addr)

	// The cached connection is closed, not redialled.
	time.Sleep(3 * time.Second)
	if _, err := sys.ServerID(ctx, "demo-0"); err == nil {
		t.Error("a request on the connection to a stopped server succeeded")
	}
	if dials, _ := fake.seen(); dials != 0 {
		t.Fatalf("the $SYS connection dialled %s %d times after its server stopped, want never", addr, dials)
	}

	// A new pod at the address: System connects to it, and says nothing
	// secret there.
	target.Servers[0].PodUID = "pod-uid-b"
	if _, err := o.System(ctx, target); err == nil {
		t.Fatal("System connected through a listener that refuses every client")
	}
	dials, connects := fake.seen()
	if dials == 0 || len(connects) == 0 {
		t.Fatalf("System with the new pod dialled %d times (%d CONNECT lines), want the new pod dialled", dials, len(connects))
	}
	for _, c := range connects {
		t.Logf("CONNECT fields: %v", keys(c))
		if _, ok := c["pass"]; ok {
			t.Errorf("the nkey system user's CONNECT holds a password: %v", keys(c))
		}
		if c["nkey"] != rt.SystemUserNKey || c["sig"] == nil || c["sig"] == "" {
			t.Errorf("CONNECT has nkey %v and sig %v, want the system user's public key and a signature", c["nkey"], c["sig"])
		}
	}

	// The check can fail: the password user's CONNECT carries it.
	pw := target
	pw.SystemNKeySeed = nil
	pw.SystemUser, pw.SystemPassword = render.SystemUserName, rt.SystemUserPassword
	pw.Servers = []ServerAddr{{Name: "demo-0", Host: l.Host, ClientPort: l.ClientPort, PodUID: "pod-uid-c"}}
	_, _ = o.System(ctx, pw)
	_, connects = fake.seen()
	if last := connects[len(connects)-1]; last["pass"] != rt.SystemUserPassword {
		t.Errorf("the password user's CONNECT has pass %v: the listener does not see what a client sends", last["pass"])
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
