package kubectlnats

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	versioned "github.com/nats-operator/nats-operator/pkg/generated/clientset/versioned"
	"github.com/nats-operator/nats-operator/pkg/observe"
)

// StatusView is status's screen as data (-o json|yaml).
type StatusView struct {
	Cluster    string                          `json:"cluster"`
	Version    string                          `json:"version,omitempty"`
	Revision   string                          `json:"revision,omitempty"`
	Conditions []metav1.Condition              `json:"conditions,omitempty"`
	Rollout    *clusterv1beta1.RolloutStatus   `json:"rollout,omitempty"`
	Removals   []clusterv1beta1.ServerRemoval  `json:"removals,omitempty"`
	Servers    []ServerView                    `json:"servers"`
	Events     []EventView                     `json:"events,omitempty"`
	Observed   bool                            `json:"observed"`
	JetStream  *clusterv1beta1.JetStreamStatus `json:"jetstream,omitempty"`
	Endpoints  *clusterv1beta1.Endpoints       `json:"endpoints,omitempty"`
	Config     *clusterv1beta1.ConfigStatus    `json:"config,omitempty"`
	Paused     bool                            `json:"paused"`
	Annots     map[string]string               `json:"oneShotAnnotations,omitempty"`
}

// ServerView is one server's line.
type ServerView struct {
	Name     string `json:"name"`
	Ready    bool   `json:"ready"`
	Version  string `json:"version,omitempty"`
	Revision string `json:"revision,omitempty"`
	// From the server's own report (observed as the controller does):
	MetaLeader bool     `json:"metaLeader"`
	Routes     []string `json:"routes,omitempty"`
	Answered   bool     `json:"answered"`
	// CatchingUp are the groups it is a lagging member of: "stream $G/ORDERS lag 12".
	CatchingUp   []string `json:"catchingUp,omitempty"`
	StartProblem string   `json:"startProblem,omitempty"`
	// Gateways and Leafnodes are, from status.servers, the clusters it has
	// a gateway to and the hub servers it is a leaf of.
	Gateways  []string `json:"gateways,omitempty"`
	Leafnodes []string `json:"leafnodes,omitempty"`
}

// EventView is one Event of the NatsCluster.
type EventView struct {
	Last    time.Time `json:"last"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count,omitempty"`
}

func statusCommand(ctx context.Context, flags *genericclioptions.ConfigFlags, s IO) *cobra.Command {
	var watch bool
	var output string
	var events int
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "One screen on a NatsCluster: servers, Settled, the rollout, holds, Events",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := newClients(flags)
			if err != nil {
				return err
			}
			cfg, ns, kube, nats := c.cfg, c.ns, c.kube, c.nats
			pv, err := livePreviewer(ctx, cfg, ns)
			if err != nil {
				return err
			}
			defer pv.stop()
			for {
				v, err := statusView(ctx, kube, nats, pv, ns, args[0], events)
				if err != nil {
					return err
				}
				if watch && s.IsTTY {
					fmt.Fprint(s.Out, "\033[H\033[2J")
				}
				switch output {
				case "json":
					b, _ := json.MarshalIndent(v, "", "  ")
					fmt.Fprintln(s.Out, string(b))
				case "yaml":
					b, _ := yaml.Marshal(v)
					fmt.Fprint(s.Out, string(b))
				default:
					printStatus(s.Out, v, time.Now())
				}
				if !watch {
					return nil
				}
				if !s.IsTTY {
					fmt.Fprintln(s.Out, strings.Repeat("-", 78))
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(2 * time.Second):
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "refresh every 2s")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	cmd.Flags().IntVar(&events, "events", 6, "how many of the last Events to show")
	return cmd
}

// statusView reads the NatsCluster's status, its servers' reports (the
// controller's observation: routes, meta leader, lag; empty when the pod IPs
// are not reachable from here) and its Events.
func statusView(ctx context.Context, kube kubernetes.Interface, nats versioned.Interface, pv *previewer, ns, name string, events int) (*StatusView, error) {
	nc, err := nats.ClusterV1beta1().NatsClusters(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	v := &StatusView{Cluster: ns + "/" + name, Version: nc.Status.Version, Conditions: nc.Status.Conditions,
		Rollout: nc.Status.Rollout, Removals: nc.Status.Removals, JetStream: nc.Status.JetStream,
		Endpoints: nc.Status.Endpoints, Config: nc.Status.Config, Paused: nc.Spec.Rollout.Paused}
	if nc.Status.Config != nil {
		v.Revision = nc.Status.Config.Revision
	}
	for _, k := range []string{clusterv1beta1.AnnotationRestartAll, clusterv1beta1.AnnotationForceStep, clusterv1beta1.AnnotationReplaceServer} {
		if val, ok := nc.Annotations[k]; ok {
			if v.Annots == nil {
				v.Annots = map[string]string{}
			}
			v.Annots[k] = val
		}
	}
	var snap *observe.Snapshot
	if p, err := pv.Decide(ctx, nc, metav1.Now()); err == nil {
		snap = p.Snapshot
	}
	v.Observed = snap != nil && snap.Verdict.Reason != clusterv1beta1.ReasonObservationFailed
	for _, st := range nc.Status.Servers {
		sv := ServerView{Name: st.Name, Ready: st.Ready, Version: st.Version, Revision: st.ConfigRevision, StartProblem: st.StartProblem,
			Gateways: st.Gateways, Leafnodes: st.Leafnodes}
		if snap != nil {
			if srv, ok := snap.Server(st.Name); ok && srv.Answered {
				sv.Answered, sv.Routes, sv.MetaLeader = true, srv.Routes, snap.MetaLeader == st.Name
				sv.CatchingUp = catchingUp(snap, st.Name)
			}
		}
		v.Servers = append(v.Servers, sv)
	}
	list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=NatsCluster,involvedObject.name=" + name})
	if err == nil {
		v.Events = lastEvents(list.Items, events)
	}
	return v, nil
}

// catchingUp are the groups server is a member of, not current in its
// leader's view.
func catchingUp(snap *observe.Snapshot, server string) []string {
	var out []string
	for _, g := range snap.Groups {
		for _, m := range g.Members {
			if m.Name == server && g.Leader != "" && (!m.Current || m.Offline) {
				s := fmt.Sprintf("%s lag %d", g.Label(), m.Lag)
				if m.Offline {
					s += " offline"
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func lastEvents(items []corev1.Event, n int) []EventView {
	var out []EventView
	for _, e := range items {
		t := e.LastTimestamp.Time
		if t.IsZero() {
			t = e.EventTime.Time
		}
		if t.IsZero() {
			t = e.CreationTimestamp.Time
		}
		out = append(out, EventView{Last: t, Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count})
	}
	slices.SortStableFunc(out, func(a, b EventView) int { return a.Last.Compare(b.Last) })
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// printStatus prints the screen, within 80 columns.
func printStatus(w io.Writer, v *StatusView, now time.Time) {
	fmt.Fprintf(w, "NatsCluster %s  version %s  revision %s\n", v.Cluster, orDash(v.Version), orDash(v.Revision))
	for _, typ := range []string{clusterv1beta1.ConditionReady, clusterv1beta1.ConditionSettled, clusterv1beta1.ConditionProgressing} {
		c := meta.FindStatusCondition(v.Conditions, typ)
		if c == nil {
			fmt.Fprintf(w, "%-12s -\n", typ)
			continue
		}
		line := fmt.Sprintf("%s %s", c.Status, c.Reason)
		if c.Status != metav1.ConditionTrue || typ == clusterv1beta1.ConditionProgressing {
			line += ": " + c.Message
		}
		fmt.Fprintf(w, "%-12s %s\n", typ, wrap(line, 66, strings.Repeat(" ", 13)))
	}
	if v.Paused {
		fmt.Fprintln(w, "paused       spec.rollout.paused: no further step starts")
	}
	for k, val := range v.Annots {
		fmt.Fprintf(w, "annotation   %s=%s\n", k, val)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-10s %-5s %-8s %-10s %-4s %-6s %s\n", "SERVER", "READY", "VERSION", "REVISION", "META", "ROUTES", "CATCHING UP")
	for _, s := range v.Servers {
		ready := "no"
		if s.Ready {
			ready = "yes"
		}
		leader, routes := "", "?"
		if s.Answered {
			routes = fmt.Sprint(len(s.Routes))
			if s.MetaLeader {
				leader = "lead"
			}
		}
		catching := fmt.Sprint(len(s.CatchingUp), " groups")
		switch {
		case !s.Answered:
			catching = "(no report)"
		case len(s.CatchingUp) == 0:
			catching = "-"
		}
		fmt.Fprintf(w, "%-10s %-5s %-8s %-10s %-4s %-6s %s\n", s.Name, ready, orDash(s.Version), orDash(s.Revision), leader, routes, catching)
		for _, g := range s.CatchingUp {
			fmt.Fprintf(w, "  catching up: %s\n", g)
		}
		if s.StartProblem != "" {
			fmt.Fprintf(w, "  cannot start: %s\n", wrap(s.StartProblem, 62, "                "))
		}
		if len(s.Gateways) > 0 {
			fmt.Fprintf(w, "  gateways to: %s\n", strings.Join(s.Gateways, ", "))
		}
		if len(s.Leafnodes) > 0 {
			fmt.Fprintf(w, "  leaf of: %s\n", strings.Join(s.Leafnodes, ", "))
		}
	}
	if js := v.JetStream; js != nil && js.FaultTolerance != nil {
		fmt.Fprintf(w, "tolerates    %s\n", wrap(describeFaultTolerance(js.FaultTolerance), 66, strings.Repeat(" ", 13)))
	}
	if !v.Observed {
		fmt.Fprintln(w, "(META, ROUTES, CATCHING UP come from the servers' monitoring ports, not\n reachable from here; the rest is the NatsCluster's status)")
	}
	if r := v.Rollout; r != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "rollout      to %s\n", orDash(r.TargetRevision))
		fmt.Fprintf(w, "  updated    %s\n", orDash(strings.Join(r.Updated, ", ")))
		fmt.Fprintf(w, "  current    %s\n", orDash(r.Current))
		fmt.Fprintf(w, "  pending    %s\n", orDash(strings.Join(r.Pending, ", ")))
		if g := r.Gate; g != nil && g.WaitingFor != "" {
			since := ""
			if g.Since != nil {
				since = fmt.Sprintf(" since %s (%s)", g.Since.UTC().Format("15:04:05"), now.Sub(g.Since.Time).Round(time.Second))
			}
			fmt.Fprintf(w, "  gate       waiting for %s%s\n", g.WaitingFor, since)
		}
		if r.RestartReason != "" {
			fmt.Fprintf(w, "  restarts   %s\n", wrap(r.RestartReason, 64, strings.Repeat(" ", 13)))
		}
	}
	for _, rm := range v.Removals {
		fmt.Fprintf(w, "removal      %s: %s\n", rm.Server, rm.Phase)
	}
	if c := meta.FindStatusCondition(v.Conditions, clusterv1beta1.ConditionProgressing); c != nil && isHold(c) {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "held         %s\n", c.Reason)
		fmt.Fprintf(w, "  %s\n", wrap(c.Message, 76, "  "))
	}
	if len(v.Events) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "EVENTS")
		for _, e := range v.Events {
			age := now.Sub(e.Last).Round(time.Second)
			line := fmt.Sprintf("%-6s %-8s %s: %s", age, e.Type, e.Reason, e.Message)
			if len(line) > 79 {
				line = line[:76] + "..."
			}
			fmt.Fprintln(w, line)
		}
	}
}

// isHold says a Progressing condition is a hold that needs the user:
// False with a reason other than up to date.
func isHold(c *metav1.Condition) bool {
	return c.Status == metav1.ConditionFalse && c.Reason != clusterv1beta1.ReasonUpToDate
}

// describeFaultTolerance: "0 servers down: stream $G/ORDERS R2 (2 of 2
// current) tolerates 0; meta R3 (3 of 3 current) tolerates 1".
func describeFaultTolerance(ft *clusterv1beta1.FaultTolerance) string {
	unit := "servers"
	if ft.Servers == 1 {
		unit = "server"
	}
	line := fmt.Sprintf("%d %s down", ft.Servers, unit)
	var parts []string
	for _, g := range ft.Groups {
		parts = append(parts, fmt.Sprintf("%s R%d (%d of %d current) tolerates %d", g.Group, g.Replicas, g.Current, g.Replicas, g.FaultTolerance))
	}
	if len(parts) > 0 {
		line += ": " + strings.Join(parts, "; ")
	}
	return line
}
