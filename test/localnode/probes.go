package localnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeTransport never reuses connections, as the kubelet's prober does, so
// a probe sees a restarted server at once.
var probeTransport = &http.Transport{
	DisableKeepAlives: true,
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
}

// probe runs the startup probe, then the readiness and liveness probes, of
// one run of the container until ctx ends. A failed startup or liveness
// probe sends a reason on kill.
func (c *container) probe(ctx context.Context, started time.Time, env []string, binary string, kill chan<- killRequest) {
	if p := c.spec.StartupProbe; p != nil {
		ok := c.probeLoop(ctx, p, started, env, binary, func(success bool, succ, fail int) bool {
			if success {
				return true
			}
			if fail >= int(threshold(p.FailureThreshold, 3)) {
				select {
				case kill <- killRequest{fmt.Sprintf("startup probe failed %d times", fail), p.TerminationGracePeriodSeconds}:
				default:
				}
				return true
			}
			return false
		}, true)
		if !ok {
			return
		}
		c.w.mu.Lock()
		c.started = true
		c.ready = c.spec.ReadinessProbe == nil
		c.w.mu.Unlock()
		c.w.markDirty()
	}
	if p := c.spec.ReadinessProbe; p != nil {
		go c.probeLoop(ctx, p, started, env, binary, func(success bool, succ, fail int) bool {
			c.w.mu.Lock()
			was := c.ready
			if success && succ >= int(threshold(p.SuccessThreshold, 1)) {
				c.ready = true
			}
			if !success && fail >= int(threshold(p.FailureThreshold, 3)) {
				c.ready = false
			}
			changed := was != c.ready
			c.w.mu.Unlock()
			if changed {
				c.w.markDirty()
			}
			return false
		}, false)
	}
	if p := c.spec.LivenessProbe; p != nil {
		go c.probeLoop(ctx, p, started, env, binary, func(success bool, succ, fail int) bool {
			if !success && fail >= int(threshold(p.FailureThreshold, 3)) {
				select {
				case kill <- killRequest{fmt.Sprintf("liveness probe failed %d times", fail), p.TerminationGracePeriodSeconds}:
				default:
				}
				return true
			}
			return false
		}, false)
	}
}

// killRequest asks for a container to be killed and restarted; grace, if
// set, is the probe's own terminationGracePeriodSeconds.
type killRequest struct {
	reason string
	grace  *int64
}

func threshold(v, def int32) int32 {
	if v <= 0 {
		return def
	}
	return v
}

// probeLoop probes every period after the initial delay, calling result
// with the consecutive success and failure counts until it returns true. It
// returns whether the last probe succeeded (untilSuccess mode) or false when
// ctx ended.
func (c *container) probeLoop(ctx context.Context, p *corev1.Probe, started time.Time, env []string, binary string, result func(success bool, succ, fail int) bool, untilSuccess bool) bool {
	period := time.Duration(threshold(p.PeriodSeconds, 10)) * time.Second
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(started.Add(time.Duration(p.InitialDelaySeconds) * time.Second))):
	}
	var succ, fail int
	for {
		ok, _ := c.probeOnce(ctx, p, env, binary)
		if ctx.Err() != nil {
			return false
		}
		if ok {
			succ, fail = succ+1, 0
		} else {
			succ, fail = 0, fail+1
		}
		if result(ok, succ, fail) {
			return ok
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(period):
		}
	}
}

// probeOnce runs one probe with its timeout.
func (c *container) probeOnce(ctx context.Context, p *corev1.Probe, env []string, binary string) (bool, string) {
	timeout := time.Duration(threshold(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case p.HTTPGet != nil:
		return c.httpGet(ctx, p.HTTPGet)
	case p.TCPSocket != nil:
		host := p.TCPSocket.Host
		if host == "" {
			host = c.w.ip
		}
		port, err := c.port(p.TCPSocket.Port)
		if err != nil {
			return false, err.Error()
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	case p.Exec != nil:
		pod, _ := c.w.current()
		argv := c.w.rewriter(pod, c.spec, binary).Command(p.Exec.Command)
		code, out, err := c.w.execIn(ctx, argv, env)
		return err == nil && code == 0, string(out)
	}
	return false, "unsupported probe"
}

// httpGet does an HTTP GET on the pod address; 200-399 is success.
func (c *container) httpGet(ctx context.Context, g *corev1.HTTPGetAction) (bool, string) {
	host := g.Host
	if host == "" {
		host = c.w.ip
	}
	port, err := c.port(g.Port)
	if err != nil {
		return false, err.Error()
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	target, err := url.Parse(g.Path)
	if err == nil {
		u.Path, u.RawQuery = target.Path, target.RawQuery
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("User-Agent", "kube-probe/1.37")
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := (&http.Client{Transport: probeTransport}).Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 10<<10))
	ok := resp.StatusCode >= 200 && resp.StatusCode < 400
	return ok, fmt.Sprintf("%d %s", resp.StatusCode, body)
}

// port resolves a numeric or named container port.
func (c *container) port(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.spec.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port %q", c.spec.Name, p.StrVal)
}
