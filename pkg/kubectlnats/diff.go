package kubectlnats

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// lineDiff is a unified-style diff of two texts, line by line (the longest
// common subsequence), with context lines of unchanged text around each
// change; "" when they are equal.
func lineDiff(a, b string, context int) string {
	if a == b {
		return ""
	}
	x, y := strings.Split(strings.TrimRight(a, "\n"), "\n"), strings.Split(strings.TrimRight(b, "\n"), "\n")
	if a == "" {
		x = nil
	}
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var lines []line
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			lines = append(lines, line{' ', x[i]})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			lines = append(lines, line{'-', x[i]})
			i++
		default:
			lines = append(lines, line{'+', y[j]})
			j++
		}
	}
	keep := make([]bool, len(lines))
	for k, l := range lines {
		if l.op != ' ' {
			for c := max(0, k-context); c <= min(len(lines)-1, k+context); c++ {
				keep[c] = true
			}
		}
	}
	var sb strings.Builder
	skipped := false
	for k, l := range lines {
		if !keep[k] {
			skipped = true
			continue
		}
		if skipped && sb.Len() > 0 {
			sb.WriteString("  ...\n")
		}
		skipped = false
		sb.WriteByte(l.op)
		sb.WriteByte(' ')
		sb.WriteString(l.text)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// revisionLines are the lines that carry a revision: they change with any
// change, so plan leaves them out of its diffs.
var revisionLines = []string{`"config_revision":`, clusterv1beta1.AnnotationConfigRevision + ":", clusterv1beta1.AnnotationTemplateRevision + ":"}

// withoutRevisions drops the lines that carry a revision.
func withoutRevisions(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !slices.ContainsFunc(revisionLines, func(r string) bool { return strings.Contains(l, r) }) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// prettyConfig indents a nats.conf (JSON) so that it diffs line by line.
func prettyConfig(conf string) string {
	if conf == "" {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(conf), "", "  "); err != nil {
		return conf
	}
	return buf.String()
}

// templateYAML is a pod template as YAML, for a diff.
func templateYAML(t *corev1.PodTemplateSpec) string {
	if t == nil {
		return ""
	}
	out, err := yaml.Marshal(t)
	if err != nil {
		return err.Error()
	}
	return string(out)
}
