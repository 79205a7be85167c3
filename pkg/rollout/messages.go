package rollout

import (
	"fmt"
	"strings"
	"time"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// stepMessage: "restarting demo-1 (2 of 3)", and how a forced step got past
// the gate or the pause.
func stepMessage(server string, k, n int, forced bool, gate gateResult, paused bool) string {
	msg := fmt.Sprintf("restarting %s (%d of %d)", server, k, n)
	if forced {
		msg += ", forced by " + clusterv1beta1.AnnotationForceStep
		switch {
		case !gate.open():
			msg += " through the closed gate (waiting for " + gate.waitingFor + ")"
		case paused:
			msg += " through the pause"
		}
	}
	return msg
}

// waitingMessage: "restarting demo-1 (2 of 3); waiting for Settled" (or
// "reloading ...", by verb) while a
// stepped server is current, "before restarting demo-2 (1 of 3); waiting for
// Settled" before a step, "restarted 3 of 3 servers; waiting for Settled"
// after the last; with the wait and the detail once the gate is blocked:
// "before restarting demo-2 (1 of 3); waiting for Settled for 12m: <detail>".
func waitingMessage(verb, cur, next string, k, n, stepped int, waitingFor string, blocked bool, waited time.Duration, detail string) string {
	var msg string
	switch {
	case cur != "":
		msg = fmt.Sprintf("%s %s (%d of %d)", verb, cur, k, n)
	case next != "":
		msg = fmt.Sprintf("before %s %s (%d of %d)", verb, next, k, n)
	default:
		msg = fmt.Sprintf("%s %d of %d servers", strings.TrimSuffix(verb, "ing")+"ed", stepped, n)
	}
	msg += "; waiting for " + waitingFor
	if blocked {
		msg += " for " + formatWait(waited) + ": " + detail
	}
	return msg
}

// scaleUpMessage: "adding demo-3, demo-4 (5 servers), no running server
// restarts; waiting for MetaMembership", with the wait and the detail once
// the gate is blocked.
func scaleUpMessage(added []string, n int, waitingFor string, blocked bool, waited time.Duration, detail string) string {
	msg := fmt.Sprintf("adding %s (%d %s), no running server restarts; waiting for %s",
		strings.Join(added, ", "), n, plural(n, "server", "servers"), waitingFor)
	if blocked {
		msg += " for " + formatWait(waited) + ": " + detail
	}
	return msg
}

// formatWait renders a wait in whole minutes: 12m, 1h5m.
func formatWait(d time.Duration) string {
	m := int(d / time.Minute)
	if m < 60 {
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%dh%dm", m/60, m%60)
}

func pausedMessage(k, n int, next string) string {
	return fmt.Sprintf("rollout paused before restarting %s (%d of %d)", next, k, n)
}

func creatingMessage(in *Input, n int, gate gateResult) string {
	msg := fmt.Sprintf("creating %d %s at revision %s", n, plural(n, "server", "servers"), in.TargetRevision)
	if !gate.open() {
		msg += "; waiting for " + gate.waitingFor
	}
	return msg
}

func upToDateMessage(in *Input, n int) string {
	return fmt.Sprintf("%d %s at revision %s", n, plural(n, "server runs", "servers run"), in.TargetRevision)
}

// splitWhy says why servers on either side of a split change cannot run side
// by side: the Why of the first splitting change (auth comes first, with the
// text of the README).
func splitWhy(changes []Change) string {
	for _, c := range changes {
		if e := effects[c.Kind]; e.Splits && e.Why != "" {
			return e.Why
		}
	}
	return "a server on the running config and one on the target config cannot work together"
}

// heldMessage is the message of a held transition, e.g. "adding auth cannot
// roll out one server at a time: a server with auth and one without cannot
// route to each other; annotate the NatsCluster
// cluster.nats-operator.io/restart-all to restart demo-2, demo-1, demo-0
// together, or recreate it", and, when streams would be left behind, what to
// back up and the value that accepts it.
func heldMessage(changes []Change, split bool, servers []string, leavesStreams bool, unknown string, streams []StreamRef, restartAllSet bool) string {
	var b strings.Builder
	var what []string
	why := resetWhy(changes)
	for _, c := range changes {
		if e := effects[c.Kind]; e.Splits || (!split && e.ResetsJetStream) {
			what = append(what, c.String())
		}
	}
	if split {
		fmt.Fprintf(&b, "%s cannot roll out one server at a time: %s; annotate the NatsCluster %s to restart %s together, or recreate it",
			strings.Join(what, " and "), splitWhy(changes), clusterv1beta1.AnnotationRestartAll, strings.Join(servers, ", "))
	} else {
		fmt.Fprintf(&b, "%s would leave JetStream empty", strings.Join(what, " and "))
	}
	if split && !resets(changes) {
		b.WriteString("; JetStream keeps its streams and messages through this change")
	}
	if leavesStreams {
		switch {
		case unknown == "":
			fmt.Fprintf(&b, "; JetStream will start empty because %s; %d %s would be left behind (%s)",
				why, len(streams), plural(len(streams), "stream", "streams"), describeStreams(streams))
		case len(streams) > 0:
			fmt.Fprintf(&b, "; JetStream will start empty because %s; %d %s would be left behind (%s), and maybe more (%s)",
				why, len(streams), plural(len(streams), "stream", "streams"), describeStreams(streams), unknown)
		default:
			fmt.Fprintf(&b, "; JetStream will start empty because %s, and the streams it holds are unknown (%s)", why, unknown)
		}
		fmt.Fprintf(&b, ": back them up, then annotate %s=%s", clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllResetJetStream)
		if restartAllSet {
			fmt.Fprintf(&b, " (%s without %s is not acted on)", clusterv1beta1.AnnotationRestartAll, clusterv1beta1.RestartAllResetJetStream)
		}
	}
	return b.String()
}

// resetWhy says why JetStream starts empty after changes that reset it:
// the first such change's reason.
func resetWhy(changes []Change) string {
	for _, c := range changes {
		switch c.Kind {
		case ChangeStandalone:
			return "the standalone server's streams are not in the cluster's meta group (nats-server deletes them as orphans)"
		case ChangeClusterName:
			return "the cluster name changes"
		}
	}
	return "the system account changes"
}

// resets says whether a change of changes leaves JetStream empty.
func resets(changes []Change) bool {
	for _, c := range changes {
		if effects[c.Kind].ResetsJetStream {
			return true
		}
	}
	return false
}

// restartAllMessage: "restarting demo-2, demo-1, demo-0 together", and the
// streams a JetStream reset leaves behind.
func restartAllMessage(servers []string, step *Step) string {
	msg := fmt.Sprintf("restarting %s together", strings.Join(servers, ", "))
	if step.ResetJetStream {
		if len(step.StreamsLeftBehind) == 0 {
			msg += "; JetStream starts empty because " + step.ResetWhy
		} else {
			msg += fmt.Sprintf("; JetStream starts empty because %s: %d %s left behind on the volumes (%s)",
				step.ResetWhy, len(step.StreamsLeftBehind), plural(len(step.StreamsLeftBehind), "stream", "streams"), describeStreams(step.StreamsLeftBehind))
		}
	}
	return msg
}

// CountStreams says how many streams there are and names them, for Events
// and logs: "no streams", "1 stream (ORDERS in the global account)",
// "7 streams (A, B, C, D, E in the global account, and 2 more)".
func CountStreams(streams []StreamRef) string {
	if len(streams) == 0 {
		return "no streams"
	}
	return fmt.Sprintf("%d %s (%s)", len(streams), plural(len(streams), "stream", "streams"), describeStreams(streams))
}

// describeStreams names up to MaxNamedStreams streams grouped by account:
// "ORDERS, EVENTS in the global account; X in account ABCDEFGH...", then
// "and N more".
func describeStreams(streams []StreamRef) string {
	shown := streams
	if len(shown) > MaxNamedStreams {
		shown = shown[:MaxNamedStreams]
	}
	var groups []string
	for i := 0; i < len(shown); {
		j := i
		var ns []string
		for j < len(shown) && shown[j].Account == shown[i].Account {
			ns = append(ns, shown[j].Name)
			j++
		}
		groups = append(groups, strings.Join(ns, ", ")+" in "+describeAccount(shown[i].Account))
		i = j
	}
	s := strings.Join(groups, "; ")
	if more := len(streams) - len(shown); more > 0 {
		s += fmt.Sprintf(", and %d more", more)
	}
	return s
}

func describeAccount(a string) string {
	if a == GlobalAccount || a == "" {
		return "the global account"
	}
	return "account " + a
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// describeChanges joins the changes' descriptions with "; ".
func describeChanges(changes []Change) string {
	parts := make([]string, len(changes))
	for i, c := range changes {
		parts[i] = c.String()
	}
	return strings.Join(parts, "; ")
}
