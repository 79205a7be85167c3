package kubectlnats

import (
	"strings"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// Exit codes of kubectl-nats (see the package comment).
const (
	ExitOK      = 0
	ExitError   = 1
	ExitHeld    = 2
	ExitInvalid = 3
	ExitRefused = 4
)

// Action is what the controller does with a change, in one word.
type Action string

// Actions, as plan prints them.
const (
	ActionNoChange   Action = "NoChange"
	ActionCreate     Action = "Create"
	ActionRoll       Action = "Roll"
	ActionRestartAll Action = "RestartAll"
	ActionReload     Action = "Reload"
	ActionScaleUp    Action = "ScaleUp"
	ActionScaleDown  Action = "ScaleDown"
	ActionReplace    Action = "Replace"
	ActionExpand     Action = "ExpandStorage"
	ActionMigrate    Action = "MigrateJetStream"
	ActionWait       Action = "Wait"
	ActionHeld       Action = "Held"
	ActionInvalid    Action = "Invalid"
	ActionDelete     Action = "Delete"
)

// progressingActions are the actions of the Progressing reasons of a
// rollout under way.
var progressingActions = map[string]Action{
	clusterv1beta1.ReasonRollingRestart:   ActionRoll,
	clusterv1beta1.ReasonReloading:        ActionReload,
	clusterv1beta1.ReasonScalingUp:        ActionScaleUp,
	clusterv1beta1.ReasonScalingDown:      ActionScaleDown,
	clusterv1beta1.ReasonReplacingServer:  ActionReplace,
	clusterv1beta1.ReasonExpandingStorage: ActionExpand,
	clusterv1beta1.ReasonCreating:         ActionCreate,
}

// PlanVerdict is what plan says of a Decision (a Verdict, in pkg/observe
// and pkg/rollout, is the Settled condition of an observation).
type PlanVerdict struct {
	Action Action `json:"action"`
	// Reason and Message are the Progressing condition the controller
	// would set, verbatim.
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// Servers are the servers the first step touches (or creates), in
	// order.
	Servers []string `json:"servers,omitempty"`
	// WaitingFor is the hold's: the closed gate check or the annotation
	// that releases it.
	WaitingFor string `json:"waitingFor,omitempty"`
	// Sentence says it in words.
	Sentence string `json:"sentence"`
	Exit     int    `json:"exitCode"`
}

// Judge turns the planner's Decision into plan's verdict. It decides
// nothing: every field comes from d.
func Judge(d rollout.Decision) PlanVerdict {
	p := d.Progressing
	v := PlanVerdict{Reason: p.Reason, Message: p.Message, Exit: ExitOK}
	switch {
	case d.Hold != nil && d.Hold.Reason == clusterv1beta1.ReasonInvalidSpec:
		v.Action, v.Exit, v.WaitingFor = ActionInvalid, ExitInvalid, d.Hold.WaitingFor
		v.Sentence = "invalid: " + d.Hold.Message
	case d.Hold != nil && d.Hold.Notify:
		v.Action, v.Exit, v.WaitingFor = ActionHeld, ExitHeld, d.Hold.WaitingFor
		v.Sentence = "held (" + d.Hold.Reason + "): no server is touched"
		if d.Hold.WaitingFor != "" {
			v.Sentence += "; released by " + d.Hold.WaitingFor
		}
	case d.Hold != nil:
		// A step of this kind is next, once the gate opens (a gate closed
		// for less than GateBlockedAfter does not need the user).
		v.Action, v.WaitingFor = ActionWait, d.Hold.WaitingFor
		if a, ok := progressingActions[p.Reason]; ok {
			v.Action = a
		}
		v.Servers = d.Create
		if v.Servers == nil && d.Rollout != nil {
			v.Servers = d.Rollout.Pending
		}
		v.Sentence = string(v.Action) + " (" + p.Reason + "): the next step waits for " + orDash(d.Hold.WaitingFor)
	case d.ReleaseFinalizer:
		v.Action, v.Sentence = ActionDelete, "the NatsCluster is deleted: the finalizer is released"
	case d.Step != nil:
		v.Action, v.Servers, v.Sentence = stepVerdict(d.Step)
	case len(d.Create) > 0:
		v.Servers = d.Create
		if p.Reason == clusterv1beta1.ReasonScalingUp {
			v.Action, v.Sentence = ActionScaleUp, "scales up: creates "+strings.Join(d.Create, ", ")+"; no running server is stepped"
		} else {
			v.Action, v.Sentence = ActionCreate, "creates "+strings.Join(d.Create, ", ")
		}
	case p.Reason == clusterv1beta1.ReasonUpToDate:
		v.Action, v.Sentence = ActionNoChange, "no change: every server runs the target"
	default:
		v.Action, v.Sentence = ActionWait, p.Reason+": "+p.Message
	}
	return v
}

func stepVerdict(s *rollout.Step) (Action, []string, string) {
	switch s.Kind {
	case rollout.RestartOne:
		return ActionRoll, s.Servers, "rolls one server at a time, first " + strings.Join(s.Servers, ", ") + forced(s)
	case rollout.RestartAll:
		sentence := "restarts every server together: " + strings.Join(s.Servers, ", ") + " (an outage)"
		if s.ResetJetStream {
			sentence += "; JetStream starts empty, streams left behind: " + streamList(s.StreamsLeftBehind)
		}
		return ActionRestartAll, s.Servers, sentence
	case rollout.Reload:
		server := ""
		if s.Reload != nil {
			server = s.Reload.Server
		}
		return ActionReload, []string{server}, "reloads the config in place, one server at a time, first " + server + " (no restart)"
	case rollout.RemoveServer:
		server, phase, replace := "", "", false
		if s.Remove != nil {
			server, phase, replace = s.Remove.Server, string(s.Remove.Phase), s.Remove.Replace
		}
		if replace {
			return ActionReplace, []string{server}, "replaces " + server + " (phase " + phase + ")"
		}
		return ActionScaleDown, []string{server}, "scales down: removes " + server + " (phase " + phase + ")"
	case rollout.ExpandClaim:
		server := ""
		if s.Expand != nil {
			server = s.Expand.Server
		}
		return ActionExpand, []string{server}, "expands the storage of " + server
	case rollout.StartMigration:
		if s.Migration == nil {
			return ActionMigrate, nil, "migrates JetStream through the auth change"
		}
		if s.Migration.Phase == rollout.MigrationBackup {
			return ActionMigrate, nil, "migrates JetStream through the auth change: backs up " + strings.Join(s.Migration.Streams, ", ") +
				", then restarts every server together and restores them into the migration's account"
		}
		return ActionMigrate, nil, "migrates JetStream: restores " + strings.Join(s.Migration.Streams, ", ") + " into the migration's account"
	}
	return Action(s.Kind), s.Servers, string(s.Kind)
}

func forced(s *rollout.Step) string {
	switch {
	case s.Forced:
		return " (forced through the gate)"
	case s.Down:
		return " (a server that is down)"
	}
	return ""
}

func streamList(refs []rollout.StreamRef) string {
	var names []string
	for _, r := range refs {
		names = append(names, r.Account+"/"+r.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
