package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nats-operator/nats-operator/internal/testport"
	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/render/rendertest"
)

const (
	clusterName = "demo"
	namespace   = "bench"
	// streamName is the R3 file stream every publisher writes to, each try
	// on its own subject under it.
	streamName = "BENCH"
)

// server is one nats-server process at a fixed place on this machine (its
// loopback ports and the directory standing in for its volumes), running
// the config pkg/render rendered for it, localized by
// rendertest.LocalizeConfig.
type server struct {
	name    string
	bin     string
	local   rendertest.Local
	conf    string
	pidFile string
	logPath string

	cmd  *exec.Cmd
	done chan struct{}
}

// cluster is the 3 servers of one rendered NatsCluster.
type cluster struct {
	servers []*server
	// grace is the lame_duck_grace_period the servers run with;
	// termination the pods' terminationGracePeriodSeconds.
	grace, termination time.Duration
}

// startCluster renders a 3-server JetStream NatsCluster (spec.lameDuck
// gracePeriod grace, or production's when grace is 0), runs it under dir
// and creates the stream.
func startCluster(ctx context.Context, bin, dir string, grace time.Duration) (*cluster, error) {
	nc := rendertest.NewCluster(namespace, clusterName, rendertest.JetStreamLimits("256Mi", "1Gi"))
	if grace > 0 {
		nc.Spec.LameDuck = &clusterv1beta1.LameDuckSpec{GracePeriod: &metav1.Duration{Duration: grace}}
	}
	out, err := render.Render(render.Input{Cluster: nc})
	if err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	_, g := render.LameDuckOf(&nc.Spec)
	c := &cluster{grace: g.Duration, termination: time.Duration(render.TerminationGracePeriodOf(&nc.Spec)) * time.Second}
	// A loopback address of 127.192.0.0/10 chosen at random, as
	// rendertest's: other servers on this machine listen on 127.0.0.1.
	host := fmt.Sprintf("127.%d.%d.%d", 192+rand.IntN(62), rand.IntN(256), 1+rand.IntN(254))
	locals := make([]rendertest.Local, len(out.Servers))
	routes := map[string]rendertest.Local{}
	for i, s := range out.Servers {
		l := rendertest.Local{Host: host, Dir: filepath.Join(dir, s.Name)}
		for _, p := range []*int{&l.ClientPort, &l.ClusterPort, &l.MonitorPort} {
			if *p, err = testport.Pick(host); err != nil {
				return nil, err
			}
		}
		for _, d := range []string{"data", "run"} {
			if err := os.MkdirAll(filepath.Join(l.Dir, d), 0o755); err != nil {
				return nil, err
			}
		}
		locals[i] = l
		routes[render.PodHost(clusterName, namespace, s.Ordinal)] = l
	}
	for i, s := range out.Servers {
		cfg, err := rendertest.LocalizeConfig(s.Config, locals[i], routes)
		if err != nil {
			return nil, fmt.Errorf("localizing %s: %w", s.Name, err)
		}
		var parsed struct {
			PidFile string `json:"pid_file"`
		}
		if err := json.Unmarshal(cfg, &parsed); err != nil || parsed.PidFile == "" {
			return nil, fmt.Errorf("%s's config has no pid_file: %v", s.Name, err)
		}
		srv := &server{name: s.Name, bin: bin, local: locals[i], conf: filepath.Join(locals[i].Dir, "nats.conf"),
			pidFile: parsed.PidFile, logPath: filepath.Join(locals[i].Dir, "server.log")}
		if err := os.WriteFile(srv.conf, cfg, 0o600); err != nil {
			return nil, err
		}
		c.servers = append(c.servers, srv)
	}
	for _, s := range c.servers {
		if err := s.start(); err != nil {
			c.stop()
			return nil, err
		}
	}
	if err := c.createStream(ctx); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (s *server) url() string { return s.local.ClientURL() }

// start runs the server on its config; its store stays under its Dir, so a
// start after a stop is the pod's restart on the same volume.
func (s *server) start() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "--config", s.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if _, err := s.get("/varz"); err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("%s exited at start (log %s)", s.name, s.logPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not answer on its monitoring port (log %s)", s.name, s.logPath)
}

// lameDuck runs the pod's preStop hook: `nats-server --signal
// ldm=<pid_file>` (render's statefulset.go).
func (s *server) lameDuck() error {
	out, err := exec.Command(s.bin, "--signal", "ldm="+s.pidFile).CombinedOutput()
	if err != nil {
		return fmt.Errorf("signalling lame duck mode to %s: %v: %s", s.name, err, out)
	}
	return nil
}

// waitExit waits for the process to exit, at most timeout (the pod's
// termination grace period), then stops it as the kubelet would (SIGTERM,
// then SIGKILL); it reports whether it exited by itself.
func (s *server) waitExit(timeout time.Duration) bool {
	select {
	case <-s.done:
		s.cmd = nil
		return true
	case <-time.After(timeout):
		s.stop()
		return false
	}
}

// stop stops the server at once (SIGTERM, SIGKILL after 15 s).
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

func (c *cluster) stop() {
	for _, s := range c.servers {
		s.stop()
	}
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

func (s *server) get(path string) ([]byte, error) {
	resp, err := httpClient.Get(s.local.MonitorURL() + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", path, resp.Status)
	}
	return b, nil
}

// urls is every running server's client URL.
func (c *cluster) urls() []string {
	var out []string
	for _, s := range c.servers {
		if s.cmd != nil {
			out = append(out, s.url())
		}
	}
	return out
}

func (c *cluster) byName(name string) *server {
	for _, s := range c.servers {
		if s.name == name {
			return s
		}
	}
	return nil
}

// control runs f with a short-lived client connected to the running
// servers.
func (c *cluster) control(ctx context.Context, f func(js jetstream.JetStream) error) error {
	nc, err := nats.Connect(strings.Join(c.urls(), ","), nats.Name("bench-control"), nats.Timeout(2*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return f(js)
}

// createStream creates the R3 file stream once the meta group has a
// leader.
func (c *cluster) createStream(ctx context.Context) error {
	var last error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		last = c.control(ctx, func(js jetstream.JetStream) error {
			_, err := js.CreateStream(ctx, jetstream.StreamConfig{
				Name: streamName, Subjects: []string{streamName + ".>"}, Storage: jetstream.FileStorage, Replicas: 3,
			})
			return err
		})
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return fmt.Errorf("creating stream %s: %w", streamName, last)
}

// current is "" when every server runs, all agree on a meta leader that
// sees every other member current (followers' views of each other say
// nothing), and the stream has a leader and two current replicas; else why
// not. leader is then the stream's leader.
func (c *cluster) current(ctx context.Context) (leader, why string) {
	type metaView struct {
		Leader   string `json:"leader"`
		Replicas []struct {
			Name    string `json:"name"`
			Current bool   `json:"current"`
			Offline bool   `json:"offline"`
		} `json:"replicas"`
	}
	views := map[string]metaView{}
	metaLeader := ""
	for _, s := range c.servers {
		if s.cmd == nil {
			return "", s.name + " is not running"
		}
		b, err := s.get("/jsz")
		if err != nil {
			return "", s.name + ": " + err.Error()
		}
		var jz struct {
			Meta *metaView `json:"meta_cluster"`
		}
		if err := json.Unmarshal(b, &jz); err != nil || jz.Meta == nil || jz.Meta.Leader == "" {
			return "", s.name + " sees no meta leader"
		}
		if metaLeader != "" && jz.Meta.Leader != metaLeader {
			return "", "meta leaders differ: " + metaLeader + " and " + jz.Meta.Leader
		}
		metaLeader, views[s.name] = jz.Meta.Leader, *jz.Meta
	}
	lv, ok := views[metaLeader]
	if !ok || len(lv.Replicas) != len(c.servers)-1 {
		return "", "meta leader " + metaLeader + " does not see every member"
	}
	for _, r := range lv.Replicas {
		if !r.Current || r.Offline {
			return "", "meta leader " + metaLeader + " sees " + r.Name + " not current"
		}
	}
	err := c.control(ctx, func(js jetstream.JetStream) error {
		st, err := js.Stream(ctx, streamName)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != len(c.servers)-1 {
			return errors.New("the stream has no leader or not all its replicas")
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return fmt.Errorf("stream replica %s is not current", r.Name)
			}
		}
		leader = info.Cluster.Leader
		return nil
	})
	if err != nil {
		return "", err.Error()
	}
	return leader, ""
}

// waitCurrent waits (at most 90 s) until current says so, and returns the
// stream's leader.
func (c *cluster) waitCurrent(ctx context.Context) (*server, error) {
	var why string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		var leader string
		if leader, why = c.current(ctx); why == "" {
			if s := c.byName(leader); s != nil {
				return s, nil
			}
			why = "unknown leader " + leader
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("the cluster is not current: %s", why)
}

// stored is how many messages the stream holds on subject.
func (c *cluster) stored(ctx context.Context, subject string) (uint64, error) {
	var n uint64
	err := c.control(ctx, func(js jetstream.JetStream) error {
		st, err := js.Stream(ctx, streamName)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			return err
		}
		n = info.State.Subjects[subject]
		return nil
	})
	return n, err
}

// serverEvent is when a server logged one of the steps of its lame duck
// mode (nats-server's lameDuckMode, server/server.go), after the signal.
type serverEvent struct {
	name string
	at   time.Duration
}

// lameDuckSteps are the notices lameDuckMode and shutdownJetStream log, in
// their order.
var lameDuckSteps = []struct{ name, notice string }{
	{"entering", "Entering lame duck mode"},
	{"jetstream_shutdown", "] JetStream Shutdown"},
	{"closing_clients", "Closing existing clients"},
	{"exiting", "Server Exiting"},
}

// lameDuckEvents reads the server's log for its lame duck steps after
// signalled (the log's microsecond timestamps, local time).
func (s *server) lameDuckEvents(signalled time.Time) []serverEvent {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return nil
	}
	found := map[string]time.Duration{}
	for _, line := range strings.Split(string(b), "\n") {
		// "[pid] 2026/12/05 10:11:12.123456 [INF] ..."
		i := strings.Index(line, "] ")
		if i < 0 || len(line) < i+2+26 {
			continue
		}
		at, err := time.ParseInLocation("2006/01/02 15:04:05.000000", line[i+2:i+2+26], time.Local)
		if err != nil || at.Before(signalled.Add(-time.Second)) {
			continue
		}
		for _, st := range lameDuckSteps {
			if _, ok := found[st.name]; !ok && strings.Contains(line, st.notice) {
				found[st.name] = at.Sub(signalled)
			}
		}
	}
	var out []serverEvent
	for _, st := range lameDuckSteps {
		if at, ok := found[st.name]; ok {
			out = append(out, serverEvent{st.name, at})
		}
	}
	return out
}
