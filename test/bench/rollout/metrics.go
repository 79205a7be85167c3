package main

import (
	"bufio"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// sample is one sample of the Prometheus text exposition.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseMetrics reads the samples of a /metrics body whose name starts with
// prefix.
func parseMetrics(body, prefix string) []sample {
	var out []sample
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, prefix) {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			s.name = line[:i]
			for _, m := range labelPair.FindAllStringSubmatch(line[i+1:j], -1) {
				s.labels[m[1]] = m[2]
			}
			rest = line[j+1:]
		} else {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			s.name, rest = f[0], strings.Join(f[1:], " ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

// histogram is one histogram series (cumulative bucket counts by upper
// bound, +Inf included), its count and sum.
type histogram struct {
	buckets map[float64]float64
	count   float64
	sum     float64
}

// readHistogram returns the histogram name with the label kind=kind.
func readHistogram(samples []sample, name, kind string) histogram {
	h := histogram{buckets: map[float64]float64{}}
	for _, s := range samples {
		if s.labels["kind"] != kind {
			continue
		}
		switch s.name {
		case name + "_bucket":
			le, err := strconv.ParseFloat(s.labels["le"], 64)
			if err == nil {
				h.buckets[le] = s.value
			}
		case name + "_count":
			h.count = s.value
		case name + "_sum":
			h.sum = s.value
		}
	}
	return h
}

// minus is the increase of h since before.
func (h histogram) minus(before histogram) histogram {
	d := histogram{buckets: map[float64]float64{}, count: h.count - before.count, sum: h.sum - before.sum}
	for le, v := range h.buckets {
		d.buckets[le] = v - before.buckets[le]
	}
	return d
}

func (h histogram) bounds() []float64 {
	var b []float64
	for le := range h.buckets {
		b = append(b, le)
	}
	sort.Float64s(b)
	return b
}

// quantile reads the q-quantile as Prometheus' histogram_quantile does:
// linear within the bucket it falls in, the highest finite bound when it
// falls in +Inf. NaN without observations.
func (h histogram) quantile(q float64) float64 {
	if h.count <= 0 {
		return math.NaN()
	}
	rank := q * h.count
	lower, prevCount := 0.0, 0.0
	bounds := h.bounds()
	for i, le := range bounds {
		c := h.buckets[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				if i > 0 {
					return bounds[i-1]
				}
				return math.NaN()
			}
			if c == prevCount {
				return le
			}
			return lower + (le-lower)*(rank-prevCount)/(c-prevCount)
		}
		lower, prevCount = le, c
	}
	return math.NaN()
}

// maxBound is the upper bound of the highest bucket that holds an
// observation (+Inf when only the last one does).
func (h histogram) maxBound() float64 {
	bounds := h.bounds()
	prev := 0.0
	found := math.NaN()
	for _, le := range bounds {
		if h.buckets[le] > prev {
			found = le
		}
		prev = h.buckets[le]
	}
	return found
}

// nearestRank is the q-quantile of values by nearest rank; NaN when empty.
func nearestRank(values []float64, q float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	v := append([]float64(nil), values...)
	sort.Float64s(v)
	i := int(math.Ceil(q*float64(len(v)))) - 1
	return v[min(max(i, 0), len(v)-1)]
}

// gaugeLabels returns the label value key of the samples of name that have
// the labels match and the value 1.
func gaugeLabels(samples []sample, name, key string, match map[string]string) []string {
	var out []string
	for _, s := range samples {
		if s.name != name || s.value != 1 {
			continue
		}
		ok := true
		for k, v := range match {
			if s.labels[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, s.labels[key])
		}
	}
	sort.Strings(out)
	return out
}
