package localnode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// rewriter maps what only makes sense inside a pod's own network and
// filesystem to its local equivalent: wildcard listen addresses to the
// pod's address (pods share the machine's network), and container mount
// paths to the local directories behind them. DNS names are left as they
// are: each pod's processes resolve them through the pod's own /etc/hosts
// (dns.go). It is pure.
type rewriter struct {
	// podIP is the pod's own loopback address.
	podIP string
	// mounts maps a container mount path to the local path behind it.
	mounts map[string]string
	// binary is the local binary of the container's image (nats-server or
	// prometheus-nats-exporter); empty leaves commands alone.
	binary string
	// command is the command word binary stands for; default nats-server.
	command string
}

// wildcardHost matches a wildcard host, alone or before a port.
var wildcardHost = regexp.MustCompile(`(^|//|\s|=)(0\.0\.0\.0|\[::\])(:\d+)?($|/|\s)`)

// portOnly matches a listen value without a host, which binds to all
// interfaces.
var portOnly = regexp.MustCompile(`^:\d+$`)

// flagPortOnly matches a command-line flag whose value is a listen address
// without a host (--health-addr=:8081), which binds to all interfaces.
var flagPortOnly = regexp.MustCompile(`^(-{1,2}[A-Za-z0-9][\w.-]*=)?(:\d+)$`)

// listenKeys are the keys whose string value is a listen address.
var listenKeys = map[string]bool{"listen": true, "http": true, "https": true, "monitor": true}

// commandWordRE matches a command word, with or without a directory, inside
// a shell string.
func commandWordRE(word string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[\s;&|(])((?:/[^\s/;&|()]+)*/)?` + regexp.QuoteMeta(word) + `($|[\s;&|)])`)
}

// natsServerWord matches nats-server as a command word.
var natsServerWord = commandWordRE("nats-server")

// String rewrites one string value.
func (r *rewriter) String(s string) string {
	if r.podIP != "" {
		s = wildcardHost.ReplaceAllString(s, "${1}"+r.podIP+"${3}${4}")
	}
	return r.paths(s)
}

// paths replaces container mount paths, longest first, wherever one starts a
// path (at the start of s or after a separator) and ends at a path boundary.
func (r *rewriter) paths(s string) string {
	if len(r.mounts) == 0 {
		return s
	}
	keys := make([]string, 0, len(r.mounts))
	for k := range r.mounts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) > len(keys[j])
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	for i := 0; i < len(s); {
		if i == 0 || strings.ContainsRune(" \t=:,'\"(;&|", rune(s[i-1])) {
			matched := false
			for _, k := range keys {
				k = strings.TrimRight(k, "/")
				if k == "" || !strings.HasPrefix(s[i:], k) {
					continue
				}
				end := i + len(k)
				if end < len(s) && !strings.ContainsRune("/ \t'\",;&|)", rune(s[end])) {
					continue
				}
				b.WriteString(r.mounts[k])
				i = end
				matched = true
				break
			}
			if matched {
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// Command rewrites a command line: the binary's command word (nats-server,
// or prometheus-nats-exporter for the exporter image), alone or with a
// directory, becomes the local binary, and every argument is rewritten as
// a string.
func (r *rewriter) Command(args []string) []string {
	word, re := r.command, natsServerWord
	if word == "" {
		word = "nats-server"
	} else if word != "nats-server" {
		re = commandWordRE(word)
	}
	out := make([]string, len(args))
	for i, a := range args {
		if r.binary != "" && (a == word || strings.HasSuffix(a, "/"+word)) {
			out[i] = r.binary
			continue
		}
		a = r.String(a)
		if r.podIP != "" && i > 0 {
			a = flagPortOnly.ReplaceAllString(a, "${1}"+r.podIP+"${2}")
		}
		if r.binary != "" && strings.Contains(a, word) {
			a = re.ReplaceAllString(a, "${1}"+r.binary+"${3}")
		}
		out[i] = a
	}
	return out
}

// listenBlocks are the config blocks whose listener binds to all interfaces
// when neither host nor listen is given.
var listenBlocks = []string{"cluster", "gateway", "leafnodes", "leaf", "websocket", "ws", "mqtt"}

// JSON rewrites every string in a JSON document and makes sure no listener
// binds to all interfaces: a top-level or listener block with a port but
// without host and listen gets the pod's address as host. Numbers are kept exactly.
func (r *rewriter) JSON(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("parsing JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("parsing JSON: trailing data")
	}
	v = r.value(v)
	if top, ok := v.(map[string]any); ok && r.podIP != "" {
		addHost(top, r.podIP, "host", "net", "listen")
		for _, b := range listenBlocks {
			// A block without a port does not listen (leafnodes with only
			// remotes): a host there would be a config nats-server cannot
			// reload into, which the pod's own config is not.
			if m, ok := top[b].(map[string]any); ok && m["port"] != nil {
				addHost(m, r.podIP, "host", "listen")
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// addHost sets m["host"] to ip unless one of keys is present.
func addHost(m map[string]any, ip string, keys ...string) {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return
		}
	}
	m["host"] = ip
}

func (r *rewriter) value(v any) any {
	switch t := v.(type) {
	case string:
		return r.String(t)
	case []any:
		for i := range t {
			t[i] = r.value(t[i])
		}
		return t
	case map[string]any:
		for k, e := range t {
			if str, ok := e.(string); ok && listenKeys[k] && portOnly.MatchString(str) && r.podIP != "" {
				e = r.podIP + str
			}
			t[k] = r.value(e)
		}
		return t
	default:
		return v
	}
}
