package render

// What the servers' existing objects run, read back once per Render: the
// config facts and revisions the planner compares with the target, the
// pod template changes it names, whether a fresh system user is rendered,
// and the route TLS default that keeps what runs.

import (
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// Running is what one server's existing objects run.
type Running struct {
	// ConfigRevision is the revision its ConfigMap's config carries; ""
	// when it has no ConfigMap or its config cannot be read.
	ConfigRevision string
	// Facts are the facts of that config, as the planner classifies them;
	// a config that cannot be read gives facts that differ from any target
	// (only the image version is set), so the server is never taken as up
	// to date.
	Facts Facts
	// RestartRevision is the config revision its pod template carries: the
	// config its pods were last restarted for.
	RestartRevision string
	// TemplateRevision is its StatefulSet's template revision
	// (TemplateRevisionOf).
	TemplateRevision string
	// TemplateChanges name the parts of its pod template that differ from
	// the target's (TemplateChanges); nil when the template revisions are
	// the same.
	TemplateChanges []string
}

// readRunning sets Server.Running of every server with a StatefulSet.
func readRunning(out *Output, running []RunningServer) {
	for _, r := range running {
		if r.Ordinal < 0 || int(r.Ordinal) >= len(out.Servers) || r.StatefulSet == nil {
			continue
		}
		target := &out.Servers[r.Ordinal]
		sts := r.StatefulSet
		rc, _ := ReadConfig(r.Config, ImageVersion(sts))
		if r.ConfigMap != nil && rc.Facts.RouteTLS {
			rc.Facts.RoutesCA = r.ConfigMap.Annotations[clusterv1beta1.AnnotationRoutesCA]
		}
		run := &Running{
			ConfigRevision:   rc.Revision,
			Facts:            rc.Facts,
			RestartRevision:  sts.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision],
			TemplateRevision: TemplateRevisionOf(sts),
		}
		if run.TemplateRevision != target.TemplateRevision {
			run.TemplateChanges = TemplateChanges(&sts.Spec.Template, &target.StatefulSet.Spec.Template)
		}
		target.Running = run
	}
}

// anyObjects says some server has a ConfigMap or a StatefulSet.
func anyObjects(running []RunningServer) bool {
	return slices.ContainsFunc(running, func(r RunningServer) bool { return r.Config != nil || r.ConfigMap != nil || r.StatefulSet != nil })
}

// objectsChange says the rendered objects differ from some server's
// existing ones: a server of the spec without both objects, a ConfigMap
// whose data or labels differ, or a StatefulSet whose pod template was
// restarted for another config or carries another template revision.
func objectsChange(out *Output, running []RunningServer) bool {
	for i := range out.Servers {
		target := &out.Servers[i]
		j := slices.IndexFunc(running, func(r RunningServer) bool { return r.Ordinal == target.Ordinal })
		if j < 0 || running[j].StatefulSet == nil || (running[j].Config == nil && running[j].ConfigMap == nil) {
			return true
		}
		r := running[j]
		if r.ConfigMap != nil {
			if !apiequality.Semantic.DeepEqual(r.ConfigMap.Data, target.ConfigMap.Data) || !apiequality.Semantic.DeepEqual(r.ConfigMap.Labels, target.ConfigMap.Labels) {
				return true
			}
		} else if string(r.Config) != target.ConfigMap.Data[ConfigKey] {
			return true
		}
		if r.StatefulSet.Spec.Template.Annotations[clusterv1beta1.AnnotationConfigRevision] != target.Revision ||
			TemplateRevisionOf(r.StatefulSet) != target.TemplateRevision {
			return true
		}
	}
	return false
}

// RouteTLSMode is the route TLS the servers get: what spec.routes.tls asks
// for (Generated when it names no mode), and without it what they run:
// Generated when a server's config has route TLS, or when no server has a
// StatefulSet yet (a new cluster); Disabled when servers run plain routes
// (a cluster an earlier release made), so an upgrade of the controller
// never turns route TLS on, which would split the cluster. running may
// include servers beyond spec.replicas; the controller gathers the route
// certificates this names before it renders.
func RouteTLSMode(nc *clusterv1beta1.NatsCluster, running []RunningServer) clusterv1beta1.RouteTLSMode {
	if t := nc.Spec.Routes.TLS; t != nil {
		if t.Mode == "" {
			return clusterv1beta1.RouteTLSGenerated
		}
		return t.Mode
	}
	created := false
	for _, r := range running {
		if r.StatefulSet == nil {
			continue
		}
		created = true
	}
	// The RouteTLS fact the planner classifies, read back as it does.
	if len(RunningRouteTLS(running)) > 0 {
		return clusterv1beta1.RouteTLSGenerated
	}
	if created {
		return clusterv1beta1.RouteTLSDisabled
	}
	return clusterv1beta1.RouteTLSGenerated
}

// RunningRouteTLS names the servers of running whose config has TLS routes,
// read back as the planner does; they verify every new route against the
// CA they loaded.
func RunningRouteTLS(running []RunningServer) []string {
	var out []string
	for _, r := range running {
		if r.StatefulSet == nil || r.Config == nil {
			continue
		}
		if rc, err := ReadConfig(r.Config, ImageVersion(r.StatefulSet)); err == nil && rc.Facts.RouteTLS {
			out = append(out, r.StatefulSet.Name)
		}
	}
	return out
}

// withRoutesCA sets the target's RoutesCA from its route TLS files.
func withRoutesCA(f Facts, routes *TLSFiles) Facts {
	if f.RouteTLS && routes != nil {
		f.RoutesCA = routes.CADigest
	}
	return f
}
