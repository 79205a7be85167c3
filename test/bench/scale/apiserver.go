package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// apiserverRequests is the API server's own count of the requests it
// served (apiserver_request_total), summed by verb, resource and
// subresource, and the seconds it spent on them
// (apiserver_request_duration_seconds_sum): who loads it during a change,
// the controller or the others (kube-controller-manager, the node, Events).
type apiserverRequests map[string]*requestLoad

type requestLoad struct {
	count, seconds float64
}

var requestLabels = regexp.MustCompile(`(verb|resource|subresource)="([^"]*)"`)

// apiserverMetrics reads the API server's /metrics: the requests it
// served, and those that queued in its flow control (parseFlowControlWait).
func (b *bench) apiserverMetrics(ctx context.Context) (apiserverRequests, requestLoad, error) {
	body, err := b.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, requestLoad{}, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return parseAPIServerRequests(string(body)), parseFlowControlWait(string(body)), nil
}

func parseAPIServerRequests(body string) apiserverRequests {
	r := apiserverRequests{}
	for _, line := range strings.Split(body, "\n") {
		var seconds bool
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
		case strings.HasPrefix(line, "apiserver_request_duration_seconds_sum{"):
			seconds = true
		default:
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		l := map[string]string{}
		for _, m := range requestLabels.FindAllStringSubmatch(line, -1) {
			l[m[1]] = m[2]
		}
		if l["verb"] == "WATCH" || l["verb"] == "CONNECT" {
			continue
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		if r[key] == nil {
			r[key] = &requestLoad{}
		}
		if seconds {
			r[key].seconds += v
		} else {
			r[key].count += v
		}
	}
	return r
}

// minus is what was served between o and r.
func (r apiserverRequests) minus(o apiserverRequests) apiserverRequests {
	d := apiserverRequests{}
	for k, v := range r {
		was := o[k]
		if was == nil {
			was = &requestLoad{}
		}
		if c := v.count - was.count; c > 0 {
			d[k] = &requestLoad{count: c, seconds: v.seconds - was.seconds}
		}
	}
	return d
}

// print prints the total and the top kinds by count, as figures named
// prefix_apiserver_*.
func (r apiserverRequests) print(prefix string, top int) {
	keys := make([]string, 0, len(r))
	var total, seconds float64
	for k, v := range r {
		keys = append(keys, k)
		total += v.count
		seconds += v.seconds
	}
	sort.Slice(keys, func(i, j int) bool { return r[keys[i]].count > r[keys[j]].count })
	figure(prefix+"_apiserver_requests", total, "requests")
	figure(prefix+"_apiserver_request_seconds", round(seconds, 1), "s")
	for _, k := range keys[:min(top, len(keys))] {
		name := strings.NewReplacer(" ", "_", "/", "_").Replace(strings.ToLower(k))
		figure(prefix+"_apiserver_"+name+"_requests", r[k].count, fmt.Sprintf("requests (%.1f s served)", r[k].seconds))
	}
}

// parseFlowControlWait is how many requests went through the API server's
// API Priority and Fairness and how long they queued before they were
// served, in all (apiserver_flowcontrol_request_wait_duration_seconds over
// every flow schema and priority level). Requests of the exempt priority
// level do not queue and are not counted.
func parseFlowControlWait(body string) requestLoad {
	var w requestLoad
	for _, line := range strings.Split(body, "\n") {
		var into *float64
		switch {
		case strings.HasPrefix(line, "apiserver_flowcontrol_request_wait_duration_seconds_sum{"):
			into = &w.seconds
		case strings.HasPrefix(line, "apiserver_flowcontrol_request_wait_duration_seconds_count{"):
			into = &w.count
		default:
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			*into += v
		}
	}
	return w
}
