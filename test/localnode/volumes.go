package localnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// volumePath returns the local directory behind a pod volume.
func (w *podWorker) volumePath(pod *corev1.Pod, v *corev1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return w.n.ClaimPath(pod.Namespace, v.PersistentVolumeClaim.ClaimName)
	case v.Ephemeral != nil:
		return w.n.ClaimPath(pod.Namespace, pod.Name+"-"+v.Name)
	case v.HostPath != nil:
		return v.HostPath.Path
	}
	return filepath.Join(w.dir, "volumes", v.Name)
}

// mounts maps the mount paths of c (all containers if c is nil) to local
// paths.
func (w *podWorker) mounts(pod *corev1.Pod, c *corev1.Container) map[string]string {
	vols := map[string]*corev1.Volume{}
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	m := map[string]string{}
	add := func(c *corev1.Container) {
		for _, vm := range c.VolumeMounts {
			v, ok := vols[vm.Name]
			if !ok {
				continue
			}
			local := w.volumePath(pod, v)
			if vm.SubPath != "" {
				local = filepath.Join(local, vm.SubPath)
			}
			p := strings.TrimRight(vm.MountPath, "/")
			if _, ok := m[p]; !ok && p != "" {
				m[p] = local
			}
		}
	}
	if c != nil {
		add(c)
		return m
	}
	for i := range pod.Spec.InitContainers {
		add(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return m
}

// errNotReady marks a volume whose source does not exist yet.
type errNotReady struct{ msg string }

func (e errNotReady) Error() string { return e.msg }

// setUpVolumes creates every volume of the pod; it fails while a source
// (claim, non-optional ConfigMap or Secret) is missing.
func (w *podWorker) setUpVolumes(ctx context.Context, pod *corev1.Pod) error {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		switch {
		case v.PersistentVolumeClaim != nil:
			if err := w.n.setUpClaim(ctx, pod.Namespace, v.PersistentVolumeClaim.ClaimName); err != nil {
				return err
			}
		case v.Ephemeral != nil:
			if err := w.n.setUpClaim(ctx, pod.Namespace, pod.Name+"-"+v.Name); err != nil {
				return err
			}
		case v.EmptyDir != nil:
			if err := os.MkdirAll(w.volumePath(pod, v), 0o777); err != nil {
				return err
			}
		case v.HostPath != nil:
			if t := v.HostPath.Type; t != nil && (*t == corev1.HostPathDirectoryOrCreate) {
				if err := os.MkdirAll(v.HostPath.Path, 0o755); err != nil {
					return err
				}
			}
		}
	}
	_, err := w.syncVolumes(pod)
	return err
}

// syncVolumes brings every ConfigMap, Secret, downward API and projected
// volume in line with its source, atomically per volume, and returns the
// names of the volumes that changed.
func (w *podWorker) syncVolumes(pod *corev1.Pod) ([]string, error) {
	rw := w.rewriter(pod, nil, "")
	var changed []string
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		files, err := w.volumeFiles(pod, v, rw)
		if err != nil {
			return changed, err
		}
		if files == nil {
			continue
		}
		ok, err := writeAtomic(w.volumePath(pod, v), files)
		if err != nil {
			return changed, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		if ok {
			changed = append(changed, v.Name)
		}
	}
	return changed, nil
}

// volumeFiles returns the files of a projected kind of volume, nil for
// other kinds.
func (w *podWorker) volumeFiles(pod *corev1.Pod, v *corev1.Volume, rw *rewriter) (map[string]file, error) {
	switch {
	case v.ConfigMap != nil:
		files := map[string]file{}
		err := w.configMapFiles(pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, mode(v.ConfigMap.DefaultMode, 0o644), rw, files)
		return files, err
	case v.Secret != nil:
		files := map[string]file{}
		err := w.secretFiles(pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, mode(v.Secret.DefaultMode, 0o644), rw, files)
		return files, err
	case v.DownwardAPI != nil:
		files := map[string]file{}
		err := w.downwardFiles(pod, v.DownwardAPI.Items, mode(v.DownwardAPI.DefaultMode, 0o644), files)
		return files, err
	case v.Projected != nil:
		files := map[string]file{}
		def := mode(v.Projected.DefaultMode, 0o644)
		for _, s := range v.Projected.Sources {
			var err error
			switch {
			case s.ConfigMap != nil:
				// As the kubelet: a missing source holds the pod unless
				// it is optional (the kube-api-access volume's
				// kube-root-ca.crt appears once kube-controller-manager
				// publishes it in the namespace).
				err = w.configMapFiles(pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, def, rw, files)
			case s.Secret != nil:
				err = w.secretFiles(pod.Namespace, s.Secret.Name, s.Secret.Items, s.Secret.Optional, def, rw, files)
			case s.DownwardAPI != nil:
				err = w.downwardFiles(pod, s.DownwardAPI.Items, def, files)
			case s.ServiceAccountToken != nil:
				var tok []byte
				if tok, err = w.serviceAccountToken(pod, s.ServiceAccountToken); err == nil {
					files[s.ServiceAccountToken.Path] = file{data: tok, mode: def}
				}
			}
			if err != nil {
				return nil, err
			}
		}
		return files, nil
	}
	return nil, nil
}

func mode(m *int32, def os.FileMode) os.FileMode {
	if m == nil {
		return def
	}
	return os.FileMode(*m)
}

func (w *podWorker) configMapFiles(ns, name string, items []corev1.KeyToPath, optional *bool, def os.FileMode, rw *rewriter, files map[string]file) error {
	cm, err := w.n.configMaps.ConfigMaps(ns).Get(name)
	if apierrors.IsNotFound(err) {
		if optional != nil && *optional {
			return nil
		}
		return errNotReady{fmt.Sprintf("configmap %q not found", name)}
	}
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles("configmap", name, data, items, optional, def, rw, files)
}

func (w *podWorker) secretFiles(ns, name string, items []corev1.KeyToPath, optional *bool, def os.FileMode, rw *rewriter, files map[string]file) error {
	s, err := w.n.secrets.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		if optional != nil && *optional {
			return nil
		}
		return errNotReady{fmt.Sprintf("secret %q not found", name)}
	}
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	for k, v := range s.Data {
		data[k] = v
	}
	for k, v := range s.StringData {
		data[k] = []byte(v)
	}
	return keyFiles("secret", name, data, items, optional, def, rw, files)
}

func keyFiles(kind, name string, data map[string][]byte, items []corev1.KeyToPath, optional *bool, def os.FileMode, rw *rewriter, files map[string]file) error {
	if len(items) == 0 {
		for k, v := range data {
			files[k] = file{data: rewriteFile(k, v, rw), mode: def}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			return errNotReady{fmt.Sprintf("%s %q has no key %q", kind, name, it.Key)}
		}
		files[it.Path] = file{data: rewriteFile(it.Path, v, rw), mode: mode(it.Mode, def)}
	}
	return nil
}

// natsConfigKeys mark a JSON document as a nats-server configuration, whose
// listeners get the pod's address when they name no host.
var natsConfigKeys = []string{"port", "listen", "server_name", "cluster", "jetstream", "http", "http_port", "monitor_port", "pid_file", "gateway", "leafnodes"}

// rewriteFile rewrites a .conf or .json file that parses as JSON; anything
// else is returned as it is.
func rewriteFile(path string, data []byte, rw *rewriter) []byte {
	if rw == nil || !(strings.HasSuffix(path, ".conf") || strings.HasSuffix(path, ".json")) {
		return data
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return data
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal(trimmed, &probe) != nil {
		return data
	}
	r := *rw
	isNATS := false
	for _, k := range natsConfigKeys {
		if _, ok := probe[k]; ok {
			isNATS = true
		}
	}
	if !isNATS {
		r.podIP = ""
	}
	out, err := r.JSON(trimmed)
	if err != nil {
		return data
	}
	return out
}

func (w *podWorker) downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, def os.FileMode, files map[string]file) error {
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = fieldValue(pod, w.ip, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			c := containerByName(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				err = fmt.Errorf("downwardAPI %s: no container %q", it.Path, it.ResourceFieldRef.ContainerName)
			} else {
				v, err = resourceValue(c, it.ResourceFieldRef)
			}
		}
		if err != nil {
			return err
		}
		files[it.Path] = file{data: []byte(v), mode: mode(it.Mode, def)}
	}
	return nil
}

func containerByName(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name || name == "" {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}
