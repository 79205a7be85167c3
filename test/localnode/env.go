package localnode

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// fieldValue resolves a downward API field path of pod, as the kubelet does
// for env vars and downwardAPI volumes.
func fieldValue(pod *corev1.Pod, ip, path string) (string, error) {
	if strings.HasPrefix(path, "metadata.labels['") && strings.HasSuffix(path, "']") {
		return pod.Labels[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")], nil
	}
	if strings.HasPrefix(path, "metadata.annotations['") && strings.HasSuffix(path, "']") {
		return pod.Annotations[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return ip, nil
	case "status.hostIP", "status.hostIPs":
		return "127.0.0.1", nil
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// resourceValue resolves a resourceFieldRef against a container, defaulting
// limits to the node's capacity as the kubelet does.
func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	var q resource.Quantity
	var ok bool
	switch ref.Resource {
	case "limits.cpu":
		q, ok = c.Resources.Limits[corev1.ResourceCPU]
		if !ok {
			q = *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI)
		}
	case "limits.memory":
		q, ok = c.Resources.Limits[corev1.ResourceMemory]
		if !ok {
			q = *resource.NewQuantity(memTotal(), resource.BinarySI)
		}
	case "limits.ephemeral-storage":
		q, ok = c.Resources.Limits[corev1.ResourceEphemeralStorage]
		if !ok {
			q = resource.MustParse("100Gi")
		}
	case "requests.cpu":
		q = c.Resources.Requests[corev1.ResourceCPU]
	case "requests.memory":
		q = c.Resources.Requests[corev1.ResourceMemory]
	case "requests.ephemeral-storage":
		q = c.Resources.Requests[corev1.ResourceEphemeralStorage]
	default:
		return "", fmt.Errorf("unsupported resourceFieldRef %q", ref.Resource)
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if strings.HasSuffix(ref.Resource, "cpu") {
		v := math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))
		return fmt.Sprint(int64(v)), nil
	}
	v := math.Ceil(float64(q.Value()) / float64(divisor.Value()))
	return fmt.Sprint(int64(v)), nil
}

// containerEnv returns the environment of a container: a minimal base, the
// envFrom sources, then env in order with $(VAR) expanded.
func (w *podWorker) containerEnv(pod *corev1.Pod, c *corev1.Container) ([]string, map[string]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	set("PATH", os.Getenv("PATH"))
	host := pod.Spec.Hostname
	if host == "" {
		host = pod.Name
	}
	set("HOSTNAME", host)
	set("HOME", w.dir)
	// As the kubelet gives every pod the kubernetes Service's address;
	// here the API server's own (there is no kube-proxy).
	if w.n.apiHost != "" {
		set("KUBERNETES_SERVICE_HOST", w.n.apiHost)
		set("KUBERNETES_SERVICE_PORT", w.n.apiPort)
		set("KUBERNETES_SERVICE_PORT_HTTPS", w.n.apiPort)
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := w.n.configMaps.ConfigMaps(pod.Namespace).Get(from.ConfigMapRef.Name)
			if err != nil {
				if from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
					continue
				}
				return nil, nil, fmt.Errorf("configmap %q: %w", from.ConfigMapRef.Name, err)
			}
			for k, v := range cm.Data {
				set(from.Prefix+k, v)
			}
		case from.SecretRef != nil:
			s, err := w.n.secrets.Secrets(pod.Namespace).Get(from.SecretRef.Name)
			if err != nil {
				if from.SecretRef.Optional != nil && *from.SecretRef.Optional {
					continue
				}
				return nil, nil, fmt.Errorf("secret %q: %w", from.SecretRef.Name, err)
			}
			for k, v := range s.Data {
				set(from.Prefix+k, string(v))
			}
		}
	}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom == nil {
			set(e.Name, expand(v, vals))
			continue
		}
		var err error
		switch f := e.ValueFrom; {
		case f.FieldRef != nil:
			v, err = fieldValue(pod, w.ip, f.FieldRef.FieldPath)
		case f.ResourceFieldRef != nil:
			v, err = resourceValue(c, f.ResourceFieldRef)
		case f.ConfigMapKeyRef != nil:
			cm, gerr := w.n.configMaps.ConfigMaps(pod.Namespace).Get(f.ConfigMapKeyRef.Name)
			optional := f.ConfigMapKeyRef.Optional != nil && *f.ConfigMapKeyRef.Optional
			if gerr != nil {
				if optional {
					continue
				}
				err = fmt.Errorf("configmap %q: %w", f.ConfigMapKeyRef.Name, gerr)
			} else if s, ok := cm.Data[f.ConfigMapKeyRef.Key]; ok {
				v = s
			} else if !optional {
				err = fmt.Errorf("configmap %q has no key %q", f.ConfigMapKeyRef.Name, f.ConfigMapKeyRef.Key)
			} else {
				continue
			}
		case f.SecretKeyRef != nil:
			s, gerr := w.n.secrets.Secrets(pod.Namespace).Get(f.SecretKeyRef.Name)
			optional := f.SecretKeyRef.Optional != nil && *f.SecretKeyRef.Optional
			if gerr != nil {
				if optional {
					continue
				}
				err = fmt.Errorf("secret %q: %w", f.SecretKeyRef.Name, gerr)
			} else if b, ok := s.Data[f.SecretKeyRef.Key]; ok {
				v = string(b)
			} else if !optional {
				err = fmt.Errorf("secret %q has no key %q", f.SecretKeyRef.Name, f.SecretKeyRef.Key)
			} else {
				continue
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		set(e.Name, v)
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vals[k])
	}
	return env, vals, nil
}

// envPaths maps container mount paths in the values of the container's
// own env (SSL_CERT_FILE=/etc/nats-monitor-ca/ca.crt) to the local
// directories behind them, as args are: a program reads the file by the
// path it is given.
func envPaths(env []string, spec []corev1.EnvVar, r *rewriter) []string {
	own := map[string]bool{}
	for _, e := range spec {
		own[e.Name] = true
	}
	out := make([]string, len(env))
	for i, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if own[k] {
			kv = k + "=" + r.paths(v)
		}
		out[i] = kv
	}
	return out
}

// expand replaces $(VAR) with its value, $$(VAR) with $(VAR) and leaves
// unknown references as they are, as the kubelet does.
func expand(s string, vals map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		if s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if s[i+1] == '(' {
			if j := strings.IndexByte(s[i+2:], ')'); j >= 0 {
				name := s[i+2 : i+2+j]
				if v, ok := vals[name]; ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[i : i+3+j])
				}
				i += 2 + j
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
