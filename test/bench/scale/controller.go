package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-operator/nats-operator/test/framework"
	"github.com/nats-operator/nats-operator/test/testenv"
)

// controller is the one nats-operator process under measurement, started
// as framework.StartController starts it, with -v=6 (every API request is
// logged) and a chosen worker count.
type controller struct {
	bin, kubeconfig, logPath string
	health, metrics          string
	extra                    []string
	cmd                      *exec.Cmd
}

func newController(ctx context.Context, env *testenv.Env, root, work string, o options) (*controller, error) {
	bin := filepath.Join(work, "nats-operator")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/nats-operator")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building the controller: %w", err)
	}
	if err := framework.ApplyRBAC(ctx, env); err != nil {
		return nil, err
	}
	cfg, err := env.ServiceAccountConfig(ctx, "nats-system", "nats-operator")
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(work, "controller.kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, cfg); err != nil {
		return nil, err
	}
	health, err := freeAddr()
	if err != nil {
		return nil, err
	}
	metrics, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return &controller{bin: bin, kubeconfig: kubeconfig, logPath: filepath.Join(work, "controller.log"),
		health: health, metrics: metrics, extra: strings.Fields(o.extraArgs)}, nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start starts the controller (workers 0: its default) and waits until it
// leads and its caches synced.
func (c *controller) start(ctx context.Context, workers int) error {
	f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	led := strings.Count(c.log(0), "Started leading")
	args := []string{"--kubeconfig", c.kubeconfig, "--leader-elect=true", "--leader-elect-namespace=nats-system",
		"--health-addr", c.health, "--metrics-addr", c.metrics, "-v=6",
		// Plain /metrics: the bench counts the controller's API requests,
		// to which a reviewed scrape (TokenReview, SubjectAccessReview)
		// would add its own.
		"--metrics-secure=false"}
	if workers > 0 {
		args = append(args, "--workers", strconv.Itoa(workers))
	}
	args = append(args, c.extra...)
	cmd := exec.Command(c.bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	c.cmd = cmd
	deadline := time.Now().Add(2 * time.Minute)
	for {
		code, _, _ := framework.Get("http://" + c.health + "/readyz")
		if code == 200 && strings.Count(c.log(0), "Started leading") > led {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller did not lead with synced caches within 2 minutes; log: %s", c.logPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits (SIGKILL after 30 s).
func (c *controller) stop() {
	if c.cmd == nil {
		return
	}
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	c.cmd = nil
}

// logSize is the log's current length: a window's start or end.
func (c *controller) logSize() int64 {
	st, err := os.Stat(c.logPath)
	if err != nil {
		return 0
	}
	return st.Size()
}

// log returns the log from offset on.
func (c *controller) log(offset int64) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil || offset > int64(len(b)) {
		return ""
	}
	return string(b[offset:])
}

// procStats are a process's CPU seconds (user+system) and resident memory.
type procStats struct {
	cpuSeconds float64
	rssMiB     float64
	hwmMiB     float64
}

// clockTicks is USER_HZ: 100 on Linux.
const clockTicks = 100

func (c *controller) proc() (procStats, error) {
	pid := c.cmd.Process.Pid
	var s procStats
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	// Fields after the command (which may hold spaces) in parentheses:
	// state is field 3, utime 14, stime 15.
	rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, _ := strconv.ParseFloat(rest[11], 64)
	stime, _ := strconv.ParseFloat(rest[12], 64)
	s.cpuSeconds = (utime + stime) / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			s.rssMiB = kb / 1024
		case "VmHWM:":
			s.hwmMiB = kb / 1024
		}
	}
	return s, nil
}

// metricsBody scrapes the controller's /metrics.
func (c *controller) metricsBody() string {
	_, body, _ := framework.Get("http://" + c.metrics + "/metrics")
	return body
}

// responseLine is client-go's -v=6 line of one API request's response;
// requests made with a sync's context carry its logger's values
// (natscluster="ns/name") before verb.
var responseLine = regexp.MustCompile(`"Response" (?:[a-zA-Z]+="[^"]*" )*verb="([A-Z]+)" url="([^"]+)"`)

// apiCounts counts the API requests in a piece of the controller's log, by
// verb (a GET of a collection is LIST, with watch=true WATCH), with Lease
// requests (leader election) apart.
type apiCounts struct {
	byVerb      map[string]int
	leaseByVerb map[string]int
	// resources are the non-Lease requests by "VERB resource".
	resources map[string]int
}

func countRequests(log string) apiCounts {
	a := apiCounts{byVerb: map[string]int{}, leaseByVerb: map[string]int{}, resources: map[string]int{}}
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		m := responseLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		verb, resource, collection, watch := classify(m[1], m[2])
		if verb == "GET" && watch {
			verb = "WATCH"
		} else if verb == "GET" && collection {
			verb = "LIST"
		}
		if resource == "leases" {
			a.leaseByVerb[verb]++
			continue
		}
		a.byVerb[verb]++
		a.resources[verb+" "+resource]++
	}
	return a
}

// classify reads a request URL: its resource (with subresource), whether it
// names a collection, whether it watches.
func classify(verb, raw string) (string, string, bool, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return verb, "?", false, false
	}
	seg := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(seg) >= 2 && seg[0] == "api":
		seg = seg[2:]
	case len(seg) >= 3 && seg[0] == "apis":
		seg = seg[3:]
	}
	if len(seg) >= 2 && seg[0] == "namespaces" {
		if len(seg) == 2 {
			seg = []string{"namespaces", seg[1]}
		} else {
			seg = seg[2:]
		}
	}
	resource := "?"
	if len(seg) > 0 {
		resource = seg[0]
	}
	if len(seg) > 2 {
		resource += "/" + seg[2]
	}
	return verb, resource, len(seg) == 1, u.Query().Get("watch") == "true"
}

func (a apiCounts) total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE"}

func (a apiCounts) writes(m map[string]int) int {
	n := 0
	for _, v := range writeVerbs {
		n += m[v]
	}
	return n
}

func sortedKeys(m map[string]int) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
