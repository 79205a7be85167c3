package kubectlnats

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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
	Cluster    string                         `json:"cluster"`
	Version    string                         `json:"version,omitempty"`
	Revision   string                         `json:"revision,omitempty"`
	Conditions []metav1.Condition             `json:"conditions,omitempty"`
	Rollout    *clusterv1beta1.RolloutStatus  `json:"rollout,omitempty"`
	Removals   []clusterv1beta1.ServerRemoval `json:"removals,omitempty"`
	Servers    []ServerView                   `json:"servers"`
	Events     []EventView                    `json:"events,omitempty"`
	// Observed says a server answered (its report is in Servers).
	Observed  bool                            `json:"observed"`
	JetStream *clusterv1beta1.JetStreamStatus `json:"jetstream,omitempty"`
	Endpoints *clusterv1beta1.Endpoints       `json:"endpoints,omitempty"`
	Config    *clusterv1beta1.ConfigStatus    `json:"config,omitempty"`
	Paused    bool                            `json:"paused"`
	Annots    map[string]string               `json:"oneShotAnnotations,omitempty"`
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
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "One screen on a NatsCluster: servers, Settled, the rollout, holds, Events",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("-o %q: want json or yaml", output)
			}
			if interval <= 0 {
				return fmt.Errorf("--interval %s: want a positive duration", interval)
			}
			c, err := newClients(flags)
			if err != nil {
				return err
			}
			cfg, ns, kube, nats := c.cfg, c.ns, c.kube, c.nats
			pv, err := livePreviewer(ctx, cfg, ns)
			if err != nil {
				if watch && ctx.Err() != nil {
					return nil // stopped (Ctrl-C) while starting
				}
				return err
			}
			defer pv.stop()
			var last []byte
			for {
				v, err := statusView(ctx, kube, nats, pv, ns, args[0], events)
				if err != nil {
					if watch && ctx.Err() != nil {
						// Stopped (Ctrl-C) while reading: not an error.
						return nil
					}
					return err
				}
				// -w on a terminal redraws the screen every time (the ages
				// move on); elsewhere (a pipe, a file) it prints a new screen
				// only when what it shows changed, as kubectl get -w does.
				now, _ := json.Marshal(v)
				if !watch || s.IsTTY || !bytes.Equal(now, last) {
					switch {
					case watch && s.IsTTY:
						fmt.Fprint(s.Out, "\033[H\033[2J")
					case last != nil && output == "yaml":
						fmt.Fprintln(s.Out, "---")
					case last != nil && output == "":
						fmt.Fprintln(s.Out, strings.Repeat("-", statusWidth-1))
					}
					printView(s.Out, v, output)
					last = now
				}
				if !watch {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "read again every --interval: on a terminal redraw the screen, else print a new one when it changed")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "with -w, how often to read again")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	cmd.Flags().IntVar(&events, "events", 6, "how many of the last Events to show")
	return cmd
}

// printView prints v as the screen, or as JSON or YAML (one document each).
func printView(w io.Writer, v *StatusView, output string) {
	switch output {
	case "json":
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(w, string(b))
	case "yaml":
		b, _ := yaml.Marshal(v)
		fmt.Fprint(w, string(b))
	default:
		printStatus(w, v, time.Now())
	}
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
	for _, st := range nc.Status.Servers {
		sv := ServerView{Name: st.Name, Ready: st.Ready, Version: st.Version, Revision: st.ConfigRevision, StartProblem: st.StartProblem,
			Gateways: st.Gateways, Leafnodes: st.Leafnodes}
		if snap != nil {
			if srv, ok := snap.Server(st.Name); ok && srv.Answered {
				sv.Answered, sv.Routes, sv.MetaLeader = true, srv.Routes, snap.MetaLeader == st.Name
				sv.CatchingUp = catchingUp(snap, st.Name)
				// What the servers report is shown when one answered: a
				// failed observation, or servers whose addresses cannot be
				// reached from here, answer none.
				v.Observed = true
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

// printStatus prints the screen within statusWidth columns: prose goes on
// over the next lines under its label, an Event's line is cut.
func printStatus(w io.Writer, v *StatusView, now time.Time) {
	// line prints text after a label of 13 columns.
	line := func(label, text string) {
		fmt.Fprintln(w, fill(fmt.Sprintf("%-13s", label), text, statusWidth))
	}
	fmt.Fprintf(w, "NatsCluster %s  version %s  revision %s\n", v.Cluster, orDash(v.Version), orDash(v.Revision))
	for _, typ := range []string{clusterv1beta1.ConditionReady, clusterv1beta1.ConditionSettled, clusterv1beta1.ConditionProgressing} {
		c := meta.FindStatusCondition(v.Conditions, typ)
		if c == nil {
			line(typ, "-")
			continue
		}
		text := fmt.Sprintf("%s %s", c.Status, c.Reason)
		if c.Status != metav1.ConditionTrue || typ == clusterv1beta1.ConditionProgressing {
			text += ": " + c.Message
		}
		line(typ, text)
	}
	if v.Paused {
		line("paused", "spec.rollout.paused: no further step starts")
	}
	for _, k := range slices.Sorted(maps.Keys(v.Annots)) {
		line("annotation", k+"="+v.Annots[k])
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
		case len(s.CatchingUp) == 1:
			catching = "1 group"
		case !s.Answered:
			catching = "(no report)"
		case len(s.CatchingUp) == 0:
			catching = "-"
		}
		fmt.Fprintf(w, "%-10s %-5s %-8s %-10s %-4s %-6s %s\n", s.Name, ready, orDash(s.Version), orDash(s.Revision), leader, routes, catching)
		for _, g := range s.CatchingUp {
			fmt.Fprintln(w, fill("  catching up: ", g, statusWidth))
		}
		if s.StartProblem != "" {
			fmt.Fprintln(w, fill("  cannot start: ", s.StartProblem, statusWidth))
		}
		if len(s.Gateways) > 0 {
			fmt.Fprintln(w, fill("  gateways to: ", strings.Join(s.Gateways, ", "), statusWidth))
		}
		if len(s.Leafnodes) > 0 {
			fmt.Fprintln(w, fill("  leaf of: ", strings.Join(s.Leafnodes, ", "), statusWidth))
		}
	}
	if js := v.JetStream; js != nil && js.FaultTolerance != nil {
		line("tolerates", describeFaultTolerance(js.FaultTolerance))
	}
	if !v.Observed {
		fmt.Fprintln(w, "(META, ROUTES, CATCHING UP come from the servers' monitoring ports, not\n reachable from here; the rest is the NatsCluster's status)")
	}
	if r := v.Rollout; r != nil {
		fmt.Fprintln(w)
		line("rollout", "to "+orDash(r.TargetRevision))
		line("  updated", orDash(strings.Join(r.Updated, ", ")))
		line("  current", orDash(r.Current))
		line("  pending", orDash(strings.Join(r.Pending, ", ")))
		if g := r.Gate; g != nil && g.WaitingFor != "" {
			since := ""
			if g.Since != nil {
				since = fmt.Sprintf(" since %s (%s)", g.Since.UTC().Format("15:04:05"), now.Sub(g.Since.Time).Round(time.Second))
			}
			line("  gate", "waiting for "+g.WaitingFor+since)
		}
		if r.RestartReason != "" {
			line("  restarts", r.RestartReason)
		}
	}
	for _, rm := range v.Removals {
		line("removal", fmt.Sprintf("%s: %s", rm.Server, rm.Phase))
	}
	if c := meta.FindStatusCondition(v.Conditions, clusterv1beta1.ConditionProgressing); c != nil && isHold(c) {
		fmt.Fprintln(w)
		line("held", c.Reason)
		fmt.Fprintln(w, fill("  ", c.Message, statusWidth))
	}
	if len(v.Events) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "EVENTS")
		for _, e := range v.Events {
			age := now.Sub(e.Last).Round(time.Second)
			fmt.Fprintln(w, cut(fmt.Sprintf("%-6s %-8s %s: %s", age, e.Type, e.Reason, e.Message), statusWidth-1))
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
